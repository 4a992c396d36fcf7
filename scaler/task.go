package scaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// phase is where a resource is in its flow.
type phase int

const (
	// phaseStart: not looked at yet; the cache tells whether the initial delay applies.
	phaseStart phase = iota
	// phaseWrite: the initial delay is over (or did not apply); the attempts to write are due.
	phaseWrite
	// phaseSettle: written; the ready replicas are polled in the cache.
	phaseSettle
	// phaseDone: finished; err tells how.
	phaseDone
)

// task is the progress of one resource in a flow. Only the goroutine that its flow's Step starts for it
// touches it, and Step waits for that goroutine.
type task struct {
	job
	phase phase
	// due is when the task's next work is due.
	due time.Time
	// deadline ends the resource's timeout: set when the write phase starts, moved on by every wait
	// for a token of the Limiter.
	deadline time.Time
	// tokens is how many tokens of the Limiter the next attempt holds; release gives back a
	// reservation not yet due (nil: none).
	tokens  int
	release func(now time.Time)
	// waitFrom is when the task began to wait for the budget (zero: it does not).
	waitFrom time.Time
	// settleBy ends the wait for the ready replicas (see settle).
	settleBy time.Time
	attempts int
	live     bool          // the next attempt reads from the API server (the cache was found behind)
	obj      client.Object // the resource as read for the next attempt; nil: read it then
	out      outcome
	err      error // the resource's failure, once done
}

// advance does the task's work that is due now, phase after phase, until it is done, waits for a later
// time, or ctx ends.
func (s *Scaler) advance(ctx context.Context, t *task) {
	for t.phase != phaseDone && ctx.Err() == nil && !s.clock().Now().Before(t.due) {
		switch t.phase {
		case phaseStart:
			s.begin(ctx, t)
		case phaseWrite:
			s.attempt(ctx, t)
		case phaseSettle:
			s.settle(ctx, t)
		}
	}
}

// begin starts the write phase, after the initial delay when the cache shows that the resource is to
// be scaled. A resource with nothing to scale, or only annotations to remove, does not wait: the
// original sleeps the delay in any case, so a flow that only tidies up would wait it for nothing.
func (s *Scaler) begin(ctx context.Context, t *task) {
	t.phase = phaseWrite
	obj, err := s.read(ctx, s.Client, t.job)
	if err != nil || obj == nil {
		return // the attempt reads again and reports
	}
	if delay := t.initialDelay(); delay > 0 && decide(t.dir, specReplicas(obj), obj.GetAnnotations()).action == scaled {
		t.log.V(1).Info("Waiting the initial delay", "delay", delay)
		t.due = s.clock().Now().Add(delay)
		return
	}
	t.obj = obj
}

// attempt makes one attempt to write the resource, then moves the task on: to the settle phase or done
// after a success, to a later attempt after a back-off, or done after a failure no attempt can fix or
// a write the Guard refused.
func (s *Scaler) attempt(ctx context.Context, t *task) {
	if t.deadline.IsZero() {
		t.deadline = s.clock().Now().Add(t.timeout())
	}
	if !s.budgeted(ctx, t) {
		return
	}
	t.attempts++
	out, err := s.try(ctx, t)
	t.out, t.tokens = out, 0
	switch {
	case err == nil:
		s.report(t.job, out, nil)
		t.phase, t.due = phaseSettle, time.Time{}
		t.settleBy = s.clock().Now().Add(levelWait)
		if !out.settle {
			t.phase = phaseDone
		}
	case ctx.Err() != nil:
		// The flow was cancelled (e.g. a handover): not a result of this resource; the next flow resumes.
	case errors.Is(err, ErrRefused):
		// Not this replica's to do now: no retry, no Event, no failure counted; Step ends the flow.
		logRefused(t.log, err)
		t.phase, t.err = phaseDone, fmt.Errorf("%s: %w", t.job, err)
	case errors.Is(err, ErrSuperseded):
		// The shoot's latest verdict is the other way (or none): no retry, no Event, no failure.
		t.log.V(1).Info("Write not sent: the verdict it acted on was superseded")
		t.phase, t.err = phaseDone, fmt.Errorf("%s: %w", t.job, err)
	default:
		s.retryOrFail(t, err)
	}
}

// budgeted tells whether the task holds the tokens its next attempt needs: none when the cache shows
// nothing to write, else one for the write and one for a read from the API server after a Conflict.
// When they are not free now, it reserves them (a scale-down) or not (a scale-up, which yields to
// scale-downs), sets the task due when to come back, and moves its deadline on by that wait: waiting
// for the budget is not the resource being slow, and holds no worker.
func (s *Scaler) budgeted(ctx context.Context, t *task) bool {
	need := 1
	if t.live {
		need = 2
	} else {
		obj, err := t.obj, error(nil)
		if obj == nil {
			obj, err = s.read(ctx, s.Client, t.job)
		}
		t.obj = obj
		if err != nil || obj == nil || !decide(t.dir, specReplicas(obj), obj.GetAnnotations()).writes() {
			return true // nothing to send (or the attempt reports why)
		}
	}
	now := s.clock().Now()
	if !t.waitFrom.IsZero() { // back from a wait for the budget: the timeout did not run meanwhile
		t.deadline, t.waitFrom = t.deadline.Add(now.Sub(t.waitFrom)), time.Time{}
	}
	if s.Limiter == nil || t.tokens >= need {
		return true
	}
	wait, release := s.Limiter.Reserve(now, t.dir, need)
	if wait <= 0 {
		t.tokens = need
		return true
	}
	t.due, t.waitFrom, t.release = now.Add(wait), now, release
	if release != nil {
		t.tokens = need // reserved: they are ours when the task is due
	}
	t.obj = nil // read again when due: the cache may have moved on
	return false
}

// releaseBudget gives back the task's reservation, if it is not yet due.
func (s *Scaler) releaseBudget(t *task) {
	if t.release != nil && t.phase != phaseDone && s.clock().Now().Before(t.due) {
		t.release(s.clock().Now())
	}
	t.release = nil
}

// retryOrFail schedules the next attempt after a back-off, or ends the task with err.
func (s *Scaler) retryOrFail(t *task, err error) {
	backoff := retryBackoff * time.Duration(t.attempts)
	now := s.clock().Now()
	switch {
	case errors.As(err, new(permanentError)):
	case t.attempts == maxAttempts:
		err = fmt.Errorf("giving up after %d attempts: %w", maxAttempts, err)
	case !now.Add(backoff).Before(t.deadline):
		err = fmt.Errorf("timeout of %s exceeded after %d attempts: %w", t.timeout(), t.attempts, err)
	default:
		t.log.V(1).Info("Retrying", "attempt", t.attempts, "err", err)
		// After a Conflict (or a NotFound: deleted since the cache read) the cache is behind; read live.
		t.live, t.due = apierrors.IsConflict(err) || apierrors.IsNotFound(err), now.Add(backoff)
		return
	}
	s.report(t.job, t.out, err)
	t.phase, t.err = phaseDone, fmt.Errorf("%s: %w", t.job, err)
}

// try reads the resource (the copy begin read, else from the cache, or from the API server when the
// cache was found behind), decides, and writes the decision in one patch locked on the resourceVersion
// read.
func (s *Scaler) try(ctx context.Context, t *task) (outcome, error) {
	obj := t.obj
	t.obj = nil
	if obj == nil {
		var err error
		if obj, err = s.readFor(ctx, t); err != nil {
			return outcome{}, err
		}
	}
	if obj == nil {
		return outcome{decision: decision{detail: "optional resource missing"}}, nil
	}
	out := outcome{decision: decide(t.dir, specReplicas(obj), obj.GetAnnotations()), obj: obj}
	if !out.writes() {
		return out, nil
	}
	patch, err := out.patch(obj.GetResourceVersion())
	if err != nil {
		return out, permanentError{err}
	}
	return out, s.request(ctx, t.deadline, s.guarded(t.job, s.patcher(obj, patch, t.dir)))
}

// readFor reads the resource for an attempt: from Client (the cache, free), or after a Conflict from
// the API server, with one of the attempt's tokens.
func (s *Scaler) readFor(ctx context.Context, t *task) (client.Object, error) {
	if !t.live {
		return s.read(ctx, s.Client, t.job)
	}
	reader := s.APIReader
	if reader == nil {
		reader = s.Client
	}
	var obj client.Object
	err := s.request(ctx, t.deadline, func(ctx context.Context) (err error) {
		obj, err = s.read(ctx, reader, t.job)
		return err
	})
	return obj, err
}

// settle polls the cache until the ready replicas have followed the write: 0 after a scale-down, the
// target after a scale-up. It is best effort and bounded by levelWait, as the original bounds it, and
// by the rest of the resource's timeout: without a running controller (or with pods that do not start
// or stop) it would never end, and the next level must not wait long. In a meltdown the next level
// down is kube-controller-manager, which races its own node monitor grace period: the order of the
// levels is the order of the writes, and pods that take their grace period to stop must not hold it.
func (s *Scaler) settle(ctx context.Context, t *task) {
	obj, err := s.read(ctx, s.Client, t.job)
	ready := int32(-1)
	if err == nil && obj != nil {
		ready = readyReplicas(obj)
	}
	until := t.deadline
	if t.settleBy.Before(until) {
		until = t.settleBy
	}
	switch now := s.clock().Now(); {
	case s.DryRun != nil:
		t.log.V(1).Info("Not waiting for the ready replicas: dry run, nothing was sent")
	case t.dir == Down && ready == 0, t.dir == Up && ready >= t.out.to:
		t.log.V(1).Info("Replicas settled", "ready", ready)
	case !now.Before(until):
		t.log.V(1).Info("Moving on without waiting longer for the ready replicas", "want", t.out.to, "ready", ready, "waited", now.Sub(t.settleBy.Add(-levelWait)).String())
	default:
		t.due = now.Add(readyPollInterval)
		if t.due.After(until) {
			t.due = until
		}
		return
	}
	t.phase = phaseDone
}
