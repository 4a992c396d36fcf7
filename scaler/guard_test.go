package scaler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// guardStub plays sharding.Ownership.Guard: it refuses with err, or lets writes through under a
// context that ends at fence; it counts its calls.
type guardStub struct {
	err   error
	fence time.Time

	mu    sync.Mutex
	calls int
}

func (g *guardStub) guard(ctx context.Context, _ string) (context.Context, context.CancelFunc, error) {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	if g.err != nil {
		return ctx, func() {}, g.err
	}
	guarded, cancel := context.WithDeadline(ctx, g.fence)
	return guarded, cancel, nil
}

func TestGuardedWritesAreNeverSentWhenRefused(t *testing.T) {
	tests := []struct {
		name  string
		guard *guardStub
		want  error
	}{
		{name: "the guard refuses: fenced", want: sharding.ErrFenced,
			guard: &guardStub{err: fmt.Errorf("%w: acting on the namespace", sharding.ErrFenced)}},
		{name: "the guard refuses: not the owner", want: sharding.ErrNotOwner,
			guard: &guardStub{err: fmt.Errorf("%w: in another partition", sharding.ErrNotOwner)}},
		{name: "the guard's deadline passed before the write", want: context.DeadlineExceeded,
			guard: &guardStub{fence: time.Now().Add(-time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, withoutDelays(upstreamInfos(t)))
			before := map[string]int32{kcm: 1, mcm: 2, ca: 3}
			for name, n := range before {
				f.create(t, name, n, nil)
			}
			f.scaler.Guard = tt.guard.guard
			failed := metricstest.Sum(t, opsMetric, ops(scaler.Down, "failed"))

			err := f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown)

			require.ErrorIs(t, err, scaler.ErrRefused)
			assert.ErrorIs(t, err, tt.want)
			assert.Empty(t, f.journal.writes, "no write was sent")
			for name, n := range before {
				assert.Equal(t, state{replicas: n}, f.state(t, name), "%s is not marked as scaled", name)
			}
			assert.Equal(t, 2, tt.guard.calls, "one check per resource of the first level, no retries; the flow ends there")
			assert.Empty(t, f.recorded(), "a refusal is no failure: no Events")
			assert.Equal(t, failed, metricstest.Sum(t, opsMetric, ops(scaler.Down, "failed")), "nor a failure counted")
		})
	}
}

func TestGuardedWritesAreSentUnderTheGuardsContext(t *testing.T) {
	f := newFixture(t, withoutDelays(upstreamInfos(t))) // a resource's timeout is 30 s
	for _, name := range []string{kcm, mcm, ca} {
		f.create(t, name, 1, nil)
	}
	guard := &guardStub{fence: time.Now().Add(10 * time.Second)}
	f.scaler.Guard = guard.guard
	var mu sync.Mutex
	var deadlines []time.Time
	f.journal.before = func(ctx context.Context, _ write) error {
		deadline, _ := ctx.Deadline()
		mu.Lock()
		deadlines = append(deadlines, deadline)
		mu.Unlock()
		return nil
	}

	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown))

	require.Len(t, deadlines, 3)
	for _, d := range deadlines {
		assert.False(t, d.After(guard.fence), "a write ends at the fence moment, not at its timeout")
	}
	assert.Equal(t, 3, guard.calls, "one check per write")
}

func TestCleanupStopsAtARefusedWrite(t *testing.T) {
	f := newFixture(t, upstreamInfos(t))
	for _, name := range []string{kcm, mcm, ca} {
		f.create(t, name, 2, map[string]string{scaler.ReplicasAnnotation: "2"}) // left by the original
	}
	guard := &guardStub{err: sharding.ErrFenced}
	f.scaler.Guard = guard.guard

	err := f.scaler.Cleanup(context.Background(), f.ns)

	require.ErrorIs(t, err, scaler.ErrRefused)
	assert.Empty(t, f.journal.writes, "no write was sent")
	assert.Equal(t, 1, guard.calls, "the next resources are not tried")
	assert.Empty(t, f.recorded())
}
