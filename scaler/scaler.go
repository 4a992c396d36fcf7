package scaler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

const (
	// maxAttempts bounds the attempts to scale one resource.
	maxAttempts = 3
	// retryBackoff is the wait before the second attempt; it grows linearly.
	retryBackoff = 200 * time.Millisecond
	// readyPollInterval is the interval at which a scaled-up resource is checked for ready replicas.
	readyPollInterval = time.Second
)

// Scaler runs scale flows on the dependent resources of one shoot namespace at a time. Its fields are
// dependencies; only nil ones get defaults (a real clock, no Events, the logger of the context).
type Scaler struct {
	// Client reaches the seed. Reads of the resources may come from a cache; the scale subresource is
	// read from the API server, and writes go to it.
	Client client.Client
	// APIReader reads a resource from the API server when the cached copy is older than its scale
	// subresource, so that annotations and replicas are judged on the same version; nil uses Client.
	APIReader client.Reader
	// Recorder records Events on the scaled resources; nil records none.
	Recorder record.EventRecorder
	// Clock times initial delays, retries and the ready-replicas polls; nil is the real clock.
	Clock clock.WithTicker
	// Log is the logger; the zero Logger means the one of the context.
	Log logr.Logger
	// Resources are the dependent resources, as configured (config.ProberConfig.DependentResourceInfos).
	Resources []config.DependentResourceInfo
}

// Reason says why a flow runs; it goes into the Events.
type Reason struct {
	// Message is the cause, e.g. "node leases expired".
	Message string
	// ExpiredFraction is the fraction of expired node leases that led to the decision.
	ExpiredFraction float64
}

// String formats r for Event messages.
func (r Reason) String() string {
	return fmt.Sprintf("%s (expired fraction %.2f)", r.Message, r.ExpiredFraction)
}

// Scale runs the flow of direction dir on the resources in namespace, level by level (see Plan). It
// returns when the flow is done, when a level failed (naming the resources that failed) or when ctx ends;
// it waits for every goroutine it started. A flow cut short leaves state that the next flow completes.
func (s *Scaler) Scale(ctx context.Context, namespace string, dir Direction, why Reason) error {
	if dir != Up && dir != Down {
		return fmt.Errorf("unknown scale direction %s", dir)
	}
	start := s.clock().Now()
	defer func() { scaleDuration.WithLabelValues(dir.String()).Observe(s.clock().Since(start).Seconds()) }()
	log := s.logger(ctx).WithValues("namespace", namespace, "direction", dir.String())
	for _, level := range Plan(s.Resources, dir) {
		n := scaleInfoOf(level[0], dir).Level
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scale-%s flow in namespace %s cancelled before level %d: %w", dir, namespace, n, err)
		}
		if err := s.scaleLevel(ctx, log, namespace, dir, why, level); err != nil {
			return fmt.Errorf("scale-%s flow in namespace %s stopped at level %d: %w", dir, namespace, n, err)
		}
	}
	return nil
}

// scaleLevel scales the resources of one level in parallel and waits for all of them.
func (s *Scaler) scaleLevel(ctx context.Context, log logr.Logger, namespace string, dir Direction, why Reason,
	level []config.DependentResourceInfo) error {
	errs := make([]error, len(level))
	var wg sync.WaitGroup
	for i, info := range level {
		j := newJob(log, namespace, info, dir, why)
		wg.Go(func() { errs[i] = s.scaleResource(ctx, j) })
	}
	wg.Wait()
	return errors.Join(errs...)
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
