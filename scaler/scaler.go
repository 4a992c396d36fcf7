package scaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/dryrun"
)

const (
	// maxAttempts bounds the attempts to write one resource.
	maxAttempts = 3
	// retryBackoff is the wait before the second attempt; it grows linearly.
	retryBackoff = 200 * time.Millisecond
	// readyPollInterval is the interval at which a scaled resource's ready replicas are read from the
	// cache.
	readyPollInterval = time.Second
	// levelWait bounds the wait for a written resource's ready replicas before the next level starts:
	// the original's resource check timeout.
	levelWait = 5 * time.Second
)

// Scaler runs scale flows on the dependent resources of shoot namespaces. Its fields are dependencies;
// only nil ones get defaults (a real clock, no Events, no limit, the logger of the context, no guard).
type Scaler struct {
	// Client reaches the seed. Its reads may come from a cache (the prober backs them with informers on
	// the dependent resources): flows decide from it, poll it for ready replicas and read nothing else
	// without a Conflict. Its writes go to the API server.
	Client client.Client
	// APIReader reads a resource from the API server after a write conflicted, so that the next attempt
	// decides on its current version; nil uses Client.
	APIReader client.Reader
	// Limiter is the budget of the scale path: every request a flow or Cleanup sends to the API server
	// (a write, or a read through APIReader) first takes one of its tokens. A flow reserves them without
	// waiting and comes back when they are due, so that a wait for the budget holds no worker; Down
	// goes before Up (see TokenBucket). Client should have no limiter of its own, so that a wait for
	// the budget never eats into a resource's timeout. nil is no limit.
	Limiter Budget
	// Recorder records events.k8s.io Events on the scaled resources, with action EventAction; nil
	// records none.
	Recorder recorder.EventRecorder
	// Clock times initial delays, back-offs, the ready-replicas polls and the timeouts; nil is the real
	// clock.
	Clock clock.WithTicker
	// Log is the logger; the zero Logger means the one of the context.
	Log logr.Logger
	// Guard is asked right before every write to a resource of namespace (sharding.Ownership.Guard):
	// an error refuses the write, else the write is sent under the returned context, which ends at
	// the moment this replica may no longer act, and cancel is called after it. A refused write is
	// not retried and not reported as a failure; it ends the flow (see ErrRefused). nil guards
	// nothing.
	Guard func(ctx context.Context, namespace string) (context.Context, context.CancelFunc, error)
	// Resources are the dependent resources, as configured (config.ProberConfig.DependentResourceInfos).
	Resources []config.DependentResourceInfo
	// Audit, when set, records every write sent, with the moment before it was sent and its result
	// (the ownership audit); nil records nothing.
	Audit *audit.Log
	// Partition gives the partition of a namespace for the audit's records
	// (sharding.Ownership.Partition); nil records partition 0.
	Partition func(namespace string) int
	// DryRun, when set, is the shadow mode (--dry-run): a write passes the same checks (the Guard, the
	// latest verdict, the budget) but is recorded there instead of sent, and the reads of a resource see
	// what the writes not sent would have made of it (dryrun.Writes.Overlay). Nothing is audited, since
	// nothing is sent, and no flow waits for ready replicas that will not move.
	DryRun *dryrun.Writes
}

// ErrRefused wraps the error of a write that Guard refused, or that its context cut off: this replica
// may not act on the namespace now. Such a flow ends without Events and without counting a failure;
// whichever replica may act finishes it from the state on the resources.
var ErrRefused = errors.New("write refused")

// ErrSuperseded wraps the error of a flow that ended because the verdict it acted on is no longer its
// namespace's latest (Reason.Current): nothing was written from then on, and no failure is counted.
var ErrSuperseded = errors.New("verdict superseded")

// Reason says why a flow runs: the verdict it acts on. Message and ExpiredFraction go into the Events.
type Reason struct {
	// Message is the cause, e.g. "node leases expired".
	Message string
	// ExpiredFraction is the fraction of expired node leases that led to the decision.
	ExpiredFraction float64
	// Current, when set, tells whether the verdict is still the namespace's latest. It is asked right
	// before every write of the flow, after the write's token was taken (the budget's wait is where a
	// stale flow sits): false sends nothing and ends the flow with an error wrapping ErrSuperseded.
	// nil is always current.
	Current func() bool
}

// String formats r for Event messages.
func (r Reason) String() string {
	return fmt.Sprintf("%s (expired fraction %.2f)", r.Message, r.ExpiredFraction)
}

// Scale runs the flow of direction dir on the resources in namespace to its end (see Flow): it steps
// the flow and waits on the clock in between. It returns nil when the flow completed, the error of a
// failed level (naming the resources that failed), or, when ctx ends, an error wrapping ctx.Err(). A flow
// cut short leaves state that the next flow completes.
func (s *Scaler) Scale(ctx context.Context, namespace string, dir Direction, why Reason) error {
	f := s.NewFlow(namespace, dir, why)
	for {
		next, done, err := f.Step(ctx)
		if done {
			return err
		}
		_ = s.sleep(ctx, next) // when ctx ends, the next Step ends the flow
	}
}

// clock returns the Clock or the real one.
func (s *Scaler) clock() clock.WithTicker {
	if s.Clock == nil {
		return clock.RealClock{}
	}
	return s.Clock
}

// logger returns Log or, when it is the zero Logger, the logger of ctx.
func (s *Scaler) logger(ctx context.Context) logr.Logger {
	if s.Log.GetSink() == nil {
		return logr.FromContextOrDiscard(ctx)
	}
	return s.Log
}

// sleep waits d on the clock; it returns early with the error of ctx when ctx ends.
func (s *Scaler) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := s.clock().NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
