package scaler_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// written returns the names of the resources written so far, sorted.
func (f *fixture) written() []string {
	var names []string
	for _, w := range f.journal.done() {
		names = append(names, w.name)
	}
	slices.Sort(names)
	return names
}

func TestStepNeverSleeps(t *testing.T) {
	running := map[string]state{kcm: {replicas: 1}, mcm: {replicas: 1}, ca: {replicas: 1}}
	// step is what a Step returned and what had been written by then; after each, the clock moves on by next.
	type step struct {
		next   time.Duration
		done   bool
		writes []string
	}
	tests := []struct {
		name  string
		dir   scaler.Direction
		start map[string]state
		steps []step
	}{
		{name: "down, every level waits its delay", dir: scaler.Down, start: running, steps: []step{
			{next: 30 * time.Second},
			{next: 30 * time.Second, writes: []string{ca, mcm}},
			{done: true, writes: []string{ca, kcm, mcm}},
		}},
		{name: "down, a level with nothing to do skips its delay", dir: scaler.Down,
			start: map[string]state{kcm: {replicas: 1}, mcm: {annotations: marks("1")}, ca: {annotations: marks("1")}},
			steps: []step{
				{next: 30 * time.Second},
				{done: true, writes: []string{kcm}},
			}},
		{name: "up, removing the annotations of an interrupted flow waits no delay", dir: scaler.Up,
			start: map[string]state{kcm: {replicas: 1}, mcm: {replicas: 2, annotations: marks("2")}, ca: {replicas: 1}},
			steps: []step{
				{done: true, writes: []string{mcm}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, withTimings(upstreamInfos(t), 30*time.Second, time.Minute))
			f.journal.ready = true
			clk := clocktesting.NewFakeClock(time.Now())
			f.scaler.Clock = clk
			for name, s := range tt.start {
				f.create(t, name, s.replicas, s.annotations)
			}
			flow := f.scaler.NewFlow(f.ns, tt.dir, meltdown)
			assert.Equal(t, tt.dir, flow.Direction())

			for i, want := range tt.steps {
				next, done, err := flow.Step(context.Background())
				require.NoError(t, err, "step %d", i)
				assert.False(t, clk.HasWaiters(), "step %d waits on nothing", i)
				assert.Equal(t, want, step{next: next, done: done, writes: f.written()}, "step %d", i)
				clk.Step(next)
			}
		})
	}
}

func TestScaleDownSettlesBeforeTheNextLevel(t *testing.T) {
	const never = -1
	tests := []struct {
		name    string
		stopAt  time.Duration // when the pods of machine-controller-manager have stopped
		wantKCM time.Duration // when level 1 (kube-controller-manager) is written
	}{
		{name: "level 1 starts when level 0 has 0 ready replicas", stopAt: 3 * time.Second, wantKCM: 3 * time.Second},
		{name: "level 1 waits at most the original's 5 s for pods that never stop", stopAt: never, wantKCM: 5 * time.Second},
		{name: "pods that stop after 5 s do not hold level 1", stopAt: 8 * time.Second, wantKCM: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, withTimings(upstreamInfos(t), 0, 30*time.Second))
			clk := clocktesting.NewFakeClock(time.Now())
			f.scaler.Clock = clk
			for _, name := range []string{kcm, mcm, ca} {
				f.create(t, name, 2, nil)
			}
			f.setReady(t, mcm, 2) // no controller runs: the test stops the pods

			flow := f.scaler.NewFlow(f.ns, scaler.Down, meltdown)
			start, kcmAt := clk.Now(), time.Duration(never)
			for {
				if clk.Since(start) == tt.stopAt {
					f.setReady(t, mcm, 0)
				}
				next, done, err := flow.Step(context.Background())
				require.NoError(t, err)
				if kcmAt == never && slices.Contains(f.written(), kcm) {
					kcmAt = clk.Since(start)
				}
				if done {
					break
				}
				require.Positive(t, next)
				require.LessOrEqual(t, next, time.Second, "the cache is polled every second")
				clk.Step(next)
			}
			assert.Equal(t, tt.wantKCM, kcmAt)
			assert.Equal(t, []string{ca, kcm, mcm}, f.written())
		})
	}
}

// setReady writes the status of a Deployment as its controller would with n pods ready.
func (f *fixture) setReady(t *testing.T, name string, n int32) {
	t.Helper()
	d := f.get(t, name)
	d.Status = appsv1.DeploymentStatus{Replicas: n, ReadyReplicas: n}
	require.NoError(t, env.Client.Status().Update(context.Background(), d))
}

// gate is a Budget that grants nothing until the test opens it: every request is told to ask again
// a second later.
type gate struct {
	asked atomic.Int32
	open  atomic.Bool
}

func newGate() *gate { return &gate{} }

func (g *gate) Reserve(time.Time, scaler.Direction, int) (time.Duration, func(time.Time)) {
	if g.open.Load() {
		return 0, nil
	}
	g.asked.Add(1)
	return time.Second, nil
}

// blocked tells whether a flow has asked for a token and was told to wait.
func (g *gate) blocked() bool { return g.asked.Load() > 0 }

func TestLimiterWaitIsNotATimeout(t *testing.T) {
	infos := withTimings(only(upstreamInfos(t), kcm), 0, 10*time.Second)
	t.Run("the timeout does not run while waiting for a token", func(t *testing.T) {
		f := newFixture(t, infos)
		f.journal.ready = true
		clk := clocktesting.NewFakeClock(time.Now())
		tokens := newGate()
		f.scaler.Clock, f.scaler.Limiter = clk, tokens
		f.create(t, kcm, 2, nil)
		done := make(chan error, 1)
		go func() { done <- f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown) }()

		require.Eventually(t, tokens.blocked, 10*time.Second, 10*time.Millisecond)
		for range 60 { // a minute of refusals, far past the 10 s timeout
			require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond)
			clk.Step(time.Second)
		}
		tokens.open.Store(true)
		require.Eventually(t, func() bool {
			if clk.HasWaiters() {
				clk.Step(time.Second)
			}
			return len(done) == 1
		}, 10*time.Second, 10*time.Millisecond)

		require.NoError(t, <-done)
		assert.Equal(t, state{annotations: marks("2")}, f.state(t, kcm))
		assert.Equal(t, []write{downWrite(kcm, 2)}, f.journal.done())
	})
	t.Run("a cancelled flow stops waiting for a token, and nothing failed", func(t *testing.T) {
		f := newFixture(t, infos)
		tokens := newGate()
		f.scaler.Limiter = tokens
		f.create(t, kcm, 2, nil)
		failed := metricstest.Sum(t, opsMetric, ops(scaler.Down, "failed"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.scaler.Scale(ctx, f.ns, scaler.Down, meltdown) }()

		require.Eventually(t, tokens.blocked, 10*time.Second, 10*time.Millisecond)
		cancel()
		require.Eventually(t, func() bool { return len(done) == 1 }, 10*time.Second, 10*time.Millisecond)

		require.ErrorIs(t, <-done, context.Canceled)
		assert.Empty(t, f.journal.done())
		assert.Empty(t, f.recorded())
		assert.Equal(t, failed, metricstest.Sum(t, opsMetric, ops(scaler.Down, "failed")))
	})
}

func TestUnknownDirection(t *testing.T) {
	s := &scaler.Scaler{}
	next, done, err := s.NewFlow("ns", scaler.Direction(0), meltdown).Step(context.Background())
	assert.Zero(t, next)
	assert.True(t, done)
	require.EqualError(t, err, "unknown scale direction Direction(0)")
	require.EqualError(t, s.Scale(context.Background(), "ns", scaler.Direction(3), meltdown), "unknown scale direction Direction(3)")
}
