// Package scaler plans and executes the level-ordered scale flows of the prober: when a shoot's nodes cannot
// reach its API server, the dependent resources (kube-controller-manager, machine-controller-manager,
// cluster-autoscaler, ...) are scaled down to 0, and when they can again, back up to the replicas they had.
//
// # Plan
//
// Plan is pure: it groups the configured resources by their level for the direction (scaleDown.level or
// scaleUp.level), in ascending order, keeping the config order inside a level. A flow runs the levels one
// after the other; the resources of a level run in parallel, and a level starts only when every resource of
// the lower levels succeeded. A failed level stops the flow. What a flow does to one resource is decided
// from its replicas and annotations alone (decide, a pure function).
//
// # Flows run in steps
//
// A Flow holds no goroutine and never waits on the clock: Flow.Step does the work that is due and returns
// how long until the next work is, so that its caller can wait (an initial delay, a back-off between
// attempts, the ready replicas) without holding a worker. Within a Step the resources of the level in
// progress advance in parallel, one goroutine each, which the Step starts and waits for; when a level
// completes, the next one starts in the same Step. A Flow is used by one goroutine at a time. Scaler.Scale
// runs a flow to its end, waiting on the clock between steps.
//
// Per resource a flow goes through these phases:
//
//  1. Initial delay: only when the cache shows that the resource is to be scaled in this direction. A
//     resource with nothing to do, or only annotations to remove, starts at once, so that a flow that
//     merely tidies up does not wait a delay for nothing.
//  2. Write: up to maxAttempts attempts, each deciding on a read of the resource and writing the decision
//     in one patch (see below); the back-off between attempts is a wait returned by Step.
//  3. Settle (best effort): after a scale-down (or when already at 0) until the cache shows 0 ready
//     replicas, after a scale-up until it shows the replicas restored, polled every readyPollInterval. It
//     never fails the flow: without a running controller, or with pods that do not start, it would never
//     end. It is what makes the next level wait for the pods of the lower ones, as the original does.
//
// # State on the resources, written in one patch
//
// The state of a flow lives on the scaled resources themselves, in the annotations the original
// dependency-watchdog defined (ReplicasAnnotation, MeltdownProtectionAnnotation), so that a flow cut short
// (a cancelled context, a crash, a handover of the shoot to another replica) can be finished by the next
// flow, whichever replica runs it. A flow writes each resource once, as one JSON merge patch of the
// resource itself (apps/v1 Deployment or StatefulSet, not its scale subresource):
//
//   - down: spec.replicas 0, ReplicasAnnotation set to the replicas it had and MeltdownProtectionAnnotation
//     set, only when the replicas are above 0, so that a repeated scale-down never records 0;
//   - up: spec.replicas set to the recorded replicas (see TargetReplicas and MaxRestoreReplicas; a missing
//     or invalid annotation restores DefaultReplicas with a Warning Event) and both annotations removed,
//     only when the replicas are 0;
//   - up, running but still carrying the meltdown marker (a flow of an earlier version cut between its two
//     writes, or a manual scale-up): both annotations removed.
//
// Earlier versions, like the original, wrote the annotations first and the replicas second on the way
// down, and the reverse on the way up, so that a resource at 0 always carried the replicas to restore and
// a cut between the writes left a running, marked resource that the next flow completed. One patch keeps
// that rule and makes it stronger: the API server applies the replicas and the annotations as one new
// version of the object, so no reader (Gardener, another replica, a watch) can ever see one without the
// other, and there is no cut between two writes left to complete. Every write of a flow leaves its
// resource either running and unmarked or at 0 and marked (an ignored resource aside: a flow only removes
// its meltdown marker, as the original does).
//
// # Concurrency control
//
// Flows read the resources through Client, which the prober backs with an informer cache, so deciding
// costs the API server nothing. Every patch carries metadata.resourceVersion of the copy it was decided
// on, so the replicas and the annotations are judged on one version, and a write based on a stale read
// (a lagging cache, or a replica that has lost the shoot) fails with Conflict instead of overriding the
// newer state. After a Conflict (or a NotFound) the next attempt reads the resource from the API server
// (APIReader) and decides again; the resource may then need nothing more. A patch names every key it
// touches, so even a trimmed cached copy cannot make it incomplete.
//
// # Writes are fenced
//
// Preconditions stop a write based on a stale read only if someone wrote the resource in between; a
// replica that lost the shoot (a pause past its renew deadline, a partition of the network) must not
// write at all. So every write, a flow's patch or a Cleanup's, asks Scaler.Guard (the prober's
// sharding.Ownership) right before it is sent, after its token was taken so that no wait comes in
// between. A refusal sends nothing; otherwise the write goes out under Guard's context, which ends at
// the replica's fence moment, and is never sent once that context has ended. A refused write (or one
// that context cut off) is not retried, records no Event and counts no failure (Guard counts it): the
// flow ends with an error wrapping ErrRefused, its resources as they were, for the replica that may
// act to finish.
//
// # Budget and timing
//
// Every request a flow (or Cleanup) sends to the API server, a patch or a read after a Conflict, first
// takes a token from the Scaler's Limiter (a Budget); reads from the cache take none. A flow never
// waits for the budget: it reserves its tokens (a scale-down, in the order it asked) or is told when
// to ask again (a scale-up, which yields to waiting scale-downs, see TokenBucket), and its Step
// returns that wait to the caller like any other; Cleanup, which has no scheduler, sleeps it. The
// prober gives the Scaler a Client without a limiter of its own, so the Limiter is the scale path's
// whole budget, and a wait for it is not a failure: a resource's timeout starts after its initial
// delay, bounds its attempts, back-offs and settle wait on the Scaler's clock, and is moved on by the
// length of every wait for a token. A request is bounded by what is left of the timeout when it is sent.
// Between levels a flow waits for the written resources' ready replicas at most levelWait (5 s, the
// original's resource check timeout).
//
// # The verdict
//
// A flow acts on a verdict (Reason), which may stop standing while the flow waits: the shoot
// recovered, or relapsed. Reason.Current is asked right before every write, after its token and
// before the Guard; a verdict that no longer stands sends nothing and ends the flow with an error
// wrapping ErrSuperseded, without Events or a failure counted. A caller that drops a flow before its
// end calls Flow.Close, which gives back the tokens it reserved.
//
// # Cancellation
//
// When ctx ends, the Step in progress ends promptly (its requests are cancelled, its goroutines waited
// for) and the flow has ended with an error wrapping ctx.Err(); the caller drops it. What was written
// stays, each resource either done or untouched, and the next flow in either direction, in any replica,
// finishes from there: NeedsScaling reports such a namespace.
//
// # Cleanup without a flow
//
// The original removes only the meltdown marker after a scale-up, leaving a lone ReplicasAnnotation on
// every resource it ever scaled. Such a leftover does not make NeedsScaling report a scale-up; instead
// NeedsOf reports it (Needs.Cleanup) and Cleanup removes it, one precondition-guarded patch per
// resource through the Limiter, with no delays and no Events. NeedsOf answers both, reading each
// resource once: what a healthy probe asks every cycle.
package scaler
