// Package scaler plans and executes the level-ordered scale flows of the prober: when a shoot's nodes cannot
// reach its API server, the dependent resources (kube-controller-manager, machine-controller-manager,
// cluster-autoscaler, ...) are scaled down to 0, and when they can again, back up to the replicas they had.
//
// # Plan
//
// Plan is pure: it groups the configured resources by their level for the direction (scaleDown.level or
// scaleUp.level), in ascending order, keeping the config order inside a level. A Scaler runs the levels one
// after the other; the resources of a level run in parallel, and a level starts only when every resource of
// the lower levels succeeded. A failed level stops the flow.
//
// # Ordering rule and why
//
// The state of a flow lives on the scaled resources themselves, in the annotations the original
// dependency-watchdog defined (ReplicasAnnotation, MeltdownProtectionAnnotation), so that a flow cut short
// (a cancelled context, a crash, a handover of the shoot to another replica) can be finished by the next
// flow, whichever replica runs it:
//
//   - On the way down the annotations are written FIRST, then the replicas are set to 0. A resource at 0
//     replicas therefore always carries the replicas to restore; a cut between the two writes leaves a
//     resource that is still running and annotated, and the next scale-down (annotating again with the same
//     value) or scale-up (removing the annotations) completes it. The replicas annotation is written only
//     when the replicas are above 0, so a repeated scale-down never overwrites it with 0.
//   - On the way up the replicas are restored FIRST, then the annotations are removed. A cut between the two
//     leaves a running resource that is still marked; the next scale-up sees replicas above 0 and only
//     removes the annotations (NeedsScaling reports such a resource for Up).
//
// # Concurrency control
//
// Reads of the resources (their annotations) may come from a cache; the replicas and the resourceVersion
// come from the scale subresource, which is always read from the API server. Every write carries a resourceVersion: the annotation patches are JSON
// merge patches with metadata.resourceVersion (they name every key they set or remove, so a stale cached
// object cannot make them incomplete), and the scale updates carry the scale's resourceVersion. A write
// based on a stale read, for example from a replica that has lost the shoot, fails with Conflict instead of
// overriding the new owner. A resource gets up to three attempts, each re-reading it.
//
// # Timing
//
// Every wait (initial delay, retry back-off, ready-replicas polls) is on the Scaler's clock and ends with
// the context. A resource's timeout starts after its initial delay and bounds its attempts and the
// best-effort wait for ready replicas after a scale-up, which never fails the flow. The goroutines of a
// level are waited for before Scale returns.
package scaler
