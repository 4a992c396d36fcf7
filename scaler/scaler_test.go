package scaler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

var (
	meltdown = scaler.Reason{Message: "node leases expired", ExpiredFraction: 0.75}
	healthy  = scaler.Reason{Message: "node leases renewed", ExpiredFraction: 0}
)

const (
	opsMetric      = "dwd_scale_operations_total"
	durationMetric = "dwd_scale_duration_seconds"
)

func ops(dir scaler.Direction, result string) map[string]string {
	return map[string]string{"direction": dir.String(), "result": result}
}

func TestScaleDownInLevelOrder(t *testing.T) {
	f := newFixture(t, upstreamInfos(t))
	before := map[string]int32{kcm: 1, mcm: 2, ca: 3}
	for name, n := range before {
		f.create(t, name, n, map[string]string{"other": "kept"})
	}
	success := metricstest.Sum(t, opsMetric, ops(scaler.Down, "success"))
	perResource := map[string]float64{}
	for name := range before {
		perResource[name] = metricstest.Sum(t, opsMetric, map[string]string{"direction": "down", "resource": name, "result": "success"})
	}
	flows := metricstest.Sum(t, durationMetric, map[string]string{"direction": "down"})

	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown))

	for name, n := range before {
		assert.Equal(t, state{replicas: 0, annotations: marks(fmt.Sprint(n))}, f.state(t, name), name)
		assert.Equal(t, "kept", f.get(t, name).Annotations["other"], name)
	}
	writes := f.journal.done()
	assert.ElementsMatch(t, []write{downWrite(kcm, 1), downWrite(mcm, 2), downWrite(ca, 3)}, writes,
		"one patch per resource sets the replicas and both annotations together")
	for _, name := range []string{mcm, ca} {
		assert.Less(t, index(t, writes, name), index(t, writes, kcm), "level 0 (%s) before level 1", name)
	}
	assert.ElementsMatch(t, []string{
		"Normal ScaledDown Scaled down from 1 to 0 replicas: node leases expired (expired fraction 0.75)",
		"Normal ScaledDown Scaled down from 2 to 0 replicas: node leases expired (expired fraction 0.75)",
		"Normal ScaledDown Scaled down from 3 to 0 replicas: node leases expired (expired fraction 0.75)",
	}, f.recorded())
	assert.Equal(t, success+3, metricstest.Sum(t, opsMetric, ops(scaler.Down, "success")))
	for name := range before {
		assert.Equal(t, perResource[name]+1, metricstest.Sum(t, opsMetric, map[string]string{"direction": "down", "resource": name, "result": "success"}), name)
	}
	assert.Equal(t, flows+1, metricstest.Sum(t, durationMetric, map[string]string{"direction": "down"}))
}

func TestScaleUpInLevelOrder(t *testing.T) {
	f := newFixture(t, withoutDelays(upstreamInfos(t)))
	f.journal.ready = true
	f.create(t, kcm, 0, marks("2"))
	f.create(t, mcm, 0, marks("3"))
	f.create(t, ca, 0, map[string]string{scaler.MeltdownProtectionAnnotation: ""}) // no replicas annotation

	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Up, healthy))

	assert.Equal(t, state{replicas: 2}, f.state(t, kcm))
	assert.Equal(t, state{replicas: 3}, f.state(t, mcm))
	assert.Equal(t, state{replicas: 1}, f.state(t, ca), "absent replicas annotation: 1")
	assert.Equal(t, []write{upWrite(kcm, 2), upWrite(mcm, 3), upWrite(ca, 1)}, f.journal.done(),
		"levels in order, one patch per resource restores the replicas and removes both annotations")
	events := f.recorded()
	assert.Contains(t, events, "Normal ScaledUp Scaled up from 0 to 3 replicas: node leases renewed (expired fraction 0.00)")
	assert.Contains(t, events, "Warning MissingAnnotation annotation "+scaler.ReplicasAnnotation+
		" is missing, the replicas before the scale-down are unknown, scaling to 1")
}

func TestScaleUpReplicasAnnotation(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        int32
		warning     string // the Warning Event, if any
	}{
		{name: "recorded", annotations: marks("4"), want: 4},
		{name: "at the bound", annotations: marks("50"), want: 50},
		{name: "absent", annotations: map[string]string{scaler.MeltdownProtectionAnnotation: ""}, want: 1,
			warning: "Warning MissingAnnotation annotation " + scaler.ReplicasAnnotation + " is missing, the replicas before the scale-down are unknown, scaling to 1"},
		{name: "no annotations", want: 1,
			warning: "Warning MissingAnnotation annotation " + scaler.ReplicasAnnotation + " is missing, the replicas before the scale-down are unknown, scaling to 1"},
		{name: "zero", annotations: marks("0"), want: 1,
			warning: "Warning InvalidAnnotation annotation " + scaler.ReplicasAnnotation + `="0" is not an integer above 0, scaling to 1`},
		{name: "not a number", annotations: marks("many"), want: 1,
			warning: "Warning InvalidAnnotation annotation " + scaler.ReplicasAnnotation + `="many" is not an integer above 0, scaling to 1`},
		{name: "above the bound", annotations: marks("51"), want: 1,
			warning: "Warning InvalidAnnotation annotation " + scaler.ReplicasAnnotation + `="51" is above the bound of 50 replicas, scaling to 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, only(upstreamInfos(t), kcm))
			f.journal.ready = true
			f.create(t, kcm, 0, tt.annotations)

			require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Up, healthy))

			assert.Equal(t, state{replicas: tt.want}, f.state(t, kcm))
			var warnings []string
			for _, e := range f.recorded() {
				if strings.HasPrefix(e, "Warning") {
					warnings = append(warnings, e)
				}
			}
			if tt.warning == "" {
				assert.Empty(t, warnings)
			} else {
				assert.Equal(t, []string{tt.warning}, warnings)
			}
		})
	}
}

func TestIgnoreScaling(t *testing.T) {
	ignore := func(more map[string]string) map[string]string {
		a := map[string]string{scaler.IgnoreScalingAnnotation: "true"}
		for k, v := range more {
			a[k] = v
		}
		return a
	}
	tests := []struct {
		name          string
		dir           scaler.Direction
		replicas      int32
		annotations   map[string]string
		want          map[string]string
		wantAnnotated bool
	}{
		{name: "down", dir: scaler.Down, replicas: 2, annotations: ignore(nil), want: ignore(nil)},
		{name: "down, meltdown annotation removed", dir: scaler.Down, replicas: 2, annotations: ignore(marks("2")),
			want: ignore(map[string]string{scaler.ReplicasAnnotation: "2"}), wantAnnotated: true},
		{name: "up", dir: scaler.Up, replicas: 0, annotations: ignore(nil), want: ignore(nil)},
		{name: "up, meltdown annotation removed", dir: scaler.Up, replicas: 0, annotations: ignore(marks("3")),
			want: ignore(map[string]string{scaler.ReplicasAnnotation: "3"}), wantAnnotated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, only(withoutDelays(upstreamInfos(t)), mcm))
			f.create(t, mcm, tt.replicas, tt.annotations)
			skipped := metricstest.Sum(t, opsMetric, ops(tt.dir, "skipped"))

			require.NoError(t, f.scaler.Scale(context.Background(), f.ns, tt.dir, meltdown))

			assert.Equal(t, state{replicas: tt.replicas, annotations: tt.want}, f.state(t, mcm))
			var want []write
			if tt.wantAnnotated {
				want = []write{{op: opPatch, name: mcm, annotations: map[string]*string{scaler.MeltdownProtectionAnnotation: nil}}}
			}
			assert.Equal(t, want, f.journal.done(), "no replicas written")
			assert.Equal(t, skipped+1, metricstest.Sum(t, opsMetric, ops(tt.dir, "skipped")))
		})
	}
}

func TestMissingResources(t *testing.T) {
	t.Run("optional missing is skipped", func(t *testing.T) {
		f := newFixture(t, upstreamInfos(t))
		f.create(t, kcm, 1, nil)
		f.create(t, mcm, 1, nil)

		require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown))

		assert.Equal(t, state{annotations: marks("1")}, f.state(t, mcm))
		assert.Equal(t, state{annotations: marks("1")}, f.state(t, kcm), "the flow went on to level 1")
	})
	t.Run("required missing stops the flow", func(t *testing.T) {
		f := newFixture(t, upstreamInfos(t))
		f.create(t, kcm, 1, nil)
		f.create(t, ca, 2, nil)
		failed := metricstest.Sum(t, opsMetric, ops(scaler.Down, "failed"))

		err := f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown)

		require.Error(t, err)
		assert.Contains(t, err.Error(), "Deployment "+f.ns+"/"+mcm)
		assert.Contains(t, err.Error(), "level 0")
		assert.NotContains(t, err.Error(), ca)
		assert.Equal(t, state{annotations: marks("2")}, f.state(t, ca), "same level, scaled")
		assert.Equal(t, state{replicas: 1}, f.state(t, kcm), "higher level, untouched")
		events := strings.Join(f.recorded(), "\n")
		assert.Contains(t, events, "Warning ScaleFailed Scale-down failed: required resource missing")
		assert.Equal(t, failed+1, metricstest.Sum(t, opsMetric, ops(scaler.Down, "failed")))
	})
}

func TestConflictIsRetried(t *testing.T) {
	tests := []struct {
		name   string
		dir    scaler.Direction
		start  state
		change func(d *appsv1.Deployment) // what someone else writes right before the flow's first patch
		want   state
		writes []write // the successful writes of the flow
	}{
		{
			name: "down, replicas changed", dir: scaler.Down, start: state{replicas: 2},
			change: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) },
			want:   state{annotations: marks("5")}, writes: []write{downWrite(kcm, 5)},
		},
		{
			name: "down, labels changed", dir: scaler.Down, start: state{replicas: 2},
			change: func(d *appsv1.Deployment) { d.Labels = map[string]string{"changed": "true"} },
			want:   state{annotations: marks("2")}, writes: []write{downWrite(kcm, 2)},
		},
		{
			name: "down, already scaled down by another replica", dir: scaler.Down, start: state{replicas: 2},
			change: func(d *appsv1.Deployment) { d.Spec.Replicas, d.Annotations = ptr.To[int32](0), marks("7") },
			want:   state{annotations: marks("7")},
		},
		{
			name: "up, labels changed", dir: scaler.Up, start: state{annotations: marks("3")},
			change: func(d *appsv1.Deployment) { d.Labels = map[string]string{"changed": "true"} },
			want:   state{replicas: 3}, writes: []write{upWrite(kcm, 3)},
		},
		{
			name: "up, already scaled up by another replica", dir: scaler.Up, start: state{annotations: marks("3")},
			change: func(d *appsv1.Deployment) { d.Spec.Replicas, d.Annotations = ptr.To[int32](3), nil },
			want:   state{replicas: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, only(upstreamInfos(t), kcm))
			f.journal.ready = true
			f.create(t, kcm, tt.start.replicas, tt.start.annotations)
			var once sync.Once
			f.journal.before = func(ctx context.Context, w write) (err error) {
				once.Do(func() {
					d := f.get(t, kcm)
					tt.change(d)
					err = env.Client.Update(ctx, d)
				})
				return err
			}

			require.NoError(t, f.scaler.Scale(context.Background(), f.ns, tt.dir, meltdown))

			assert.Equal(t, tt.want, f.state(t, kcm))
			assert.Equal(t, tt.writes, f.journal.done(), "the second attempt decides on a fresh read")
			failed := f.journal.failed()
			require.Len(t, failed, 1)
			assert.True(t, apierrors.IsConflict(failed[0].err), "a stale write fails with Conflict: %v", failed[0].err)
		})
	}
}

func TestAStaleCacheIsReadAfresh(t *testing.T) {
	// No readiness is faked through this test's own client: a short timeout bounds the ready wait.
	f := newFixture(t, withTimings(only(upstreamInfos(t), kcm), 0, 2*time.Second))
	f.journal.ready = true
	f.create(t, kcm, 0, marks("3"))
	stale := f.get(t, kcm)
	// The Deployment changes (another flow recorded 5 replicas) while the cache still has the old copy.
	d := f.get(t, kcm)
	d.Annotations[scaler.ReplicasAnnotation] = "5"
	require.NoError(t, env.Client.Update(context.Background(), d))
	live, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	f.scaler.APIReader = live
	f.scaler.Client = interceptor.NewClient(live, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if dep, ok := obj.(*appsv1.Deployment); ok && key.Name == kcm {
				stale.DeepCopyInto(dep)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Up, healthy))
	assert.Equal(t, state{replicas: 5}, f.state(t, kcm), "the replicas come from the version the write is locked on")
}

func TestConflictsUpToMaxAttempts(t *testing.T) {
	tests := []struct {
		name      string
		conflicts int32
		wantErr   bool
	}{
		{name: "two conflicts, the third attempt writes", conflicts: 2},
		{name: "three conflicts fail the resource", conflicts: 3, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, only(upstreamInfos(t), kcm))
			f.journal.ready = true
			f.create(t, kcm, 0, marks("3"))
			// Someone else writes the Deployment before each of the first patches, which then conflict.
			var writes atomic.Int32
			f.journal.before = func(ctx context.Context, w write) error {
				if writes.Add(1) > tt.conflicts {
					return nil
				}
				d := f.get(t, kcm)
				d.Labels = map[string]string{"other-write": fmt.Sprint(writes.Load())}
				return env.Client.Update(ctx, d)
			}

			err := f.scaler.Scale(context.Background(), f.ns, scaler.Up, meltdown)

			assert.Len(t, f.journal.failed(), int(tt.conflicts), "every conflict was retried on a fresh read")
			if !tt.wantErr {
				require.NoError(t, err)
				assert.Equal(t, state{replicas: 3}, f.state(t, kcm))
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "giving up after 3 attempts")
			assert.Equal(t, state{annotations: marks("3")}, f.state(t, kcm))
			assert.Contains(t, strings.Join(f.recorded(), "\n"), "Warning ScaleFailed Scale-up failed")
		})
	}
}

func TestCancelledFlowIsCompleted(t *testing.T) {
	up := map[string]state{kcm: {replicas: 1}, mcm: {replicas: 2}, ca: {replicas: 3}}
	down := map[string]state{kcm: {annotations: marks("1")}, mcm: {annotations: marks("2")}, ca: {annotations: marks("3")}}
	tests := []struct {
		name        string
		start       map[string]state
		first, next scaler.Direction
		cutAfter    string // the first flow is cancelled right after the write of this resource
		want        map[string]state
	}{
		{name: "down, cut after level 0", start: up, first: scaler.Down, next: scaler.Down, cutAfter: mcm, want: down},
		{name: "down cut after level 0, then up", start: up, first: scaler.Down, next: scaler.Up, cutAfter: mcm, want: up},
		{name: "up, cut after level 0", start: down, first: scaler.Up, next: scaler.Up, cutAfter: kcm, want: up},
		{name: "up, cut after level 1", start: down, first: scaler.Up, next: scaler.Up, cutAfter: mcm, want: up},
		{name: "up cut after level 1, then down", start: down, first: scaler.Up, next: scaler.Down, cutAfter: mcm, want: down},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos := withoutDelays(upstreamInfos(t))
			f := newFixture(t, infos)
			for name, s := range tt.start {
				f.create(t, name, s.replicas, s.annotations)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.journal.ready = true
			f.journal.after = func(w write) {
				if w.name == tt.cutAfter {
					cancel()
				}
			}
			err := f.scaler.Scale(ctx, f.ns, tt.first, meltdown)
			require.ErrorIs(t, err, context.Canceled)

			assertCompletes(t, f, infos, tt.next, tt.want)
		})
	}
}

// TestStateOfTwoWriteFlowsIsCompleted starts from the state that a flow of an earlier version (which
// wrote annotations and replicas in two writes) left when cut between them: a running resource that
// carries both annotations.
func TestStateOfTwoWriteFlowsIsCompleted(t *testing.T) {
	tests := []struct {
		name string
		next scaler.Direction
		want state
	}{
		{name: "down", next: scaler.Down, want: state{annotations: marks("2")}},
		{name: "up", next: scaler.Up, want: state{replicas: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos := withoutDelays(only(upstreamInfos(t), kcm))
			f := newFixture(t, infos)
			f.create(t, kcm, 2, marks("5"))
			assertCompletes(t, f, infos, tt.next, map[string]state{kcm: tt.want})
		})
	}
}

// assertCompletes checks that the state in f's namespace calls for a flow in direction next, that this
// flow (run by another Scaler, as another replica would) reaches want, and that then nothing is left.
func assertCompletes(t *testing.T, f *fixture, infos []config.DependentResourceInfo, next scaler.Direction, want map[string]state) {
	t.Helper()
	f.reset(t, infos)
	f.journal.ready = true
	needs, err := f.scaler.NeedsScaling(context.Background(), f.ns, next)
	require.NoError(t, err)
	assert.True(t, needs, "the interrupted flow must be visible")
	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, next, meltdown))
	for name, s := range want {
		assert.Equal(t, s, f.state(t, name), name)
	}

	f.reset(t, infos)
	needs, err = f.scaler.NeedsScaling(context.Background(), f.ns, next)
	require.NoError(t, err)
	assert.False(t, needs, "nothing left to do")
	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, next, meltdown))
	assert.Empty(t, f.journal.done(), "a repeated flow writes nothing")
}

func TestNeedsScaling(t *testing.T) {
	ignored := map[string]string{scaler.IgnoreScalingAnnotation: "true"}
	ignoredMelted := map[string]string{scaler.IgnoreScalingAnnotation: "true", scaler.MeltdownProtectionAnnotation: ""}
	running := state{replicas: 1}
	stopped := state{annotations: marks("1")}
	tests := []struct {
		name      string
		dir       scaler.Direction
		resources map[string]*state // nil: missing
		want      bool
	}{
		{"down, all running", scaler.Down, map[string]*state{kcm: &running, mcm: &running, ca: &running}, true},
		{"down, one running", scaler.Down, map[string]*state{kcm: &stopped, mcm: &stopped, ca: &running}, true},
		{"down, all at 0", scaler.Down, map[string]*state{kcm: &stopped, mcm: &stopped, ca: &stopped}, false},
		{"down, only an ignored one running", scaler.Down,
			map[string]*state{kcm: &stopped, mcm: {replicas: 1, annotations: ignored}, ca: &stopped}, false},
		{"down, optional missing", scaler.Down, map[string]*state{kcm: &stopped, mcm: &stopped}, false},
		{"down, required missing", scaler.Down, map[string]*state{kcm: &stopped, ca: &stopped}, true},
		{"up, all running", scaler.Up, map[string]*state{kcm: &running, mcm: &running, ca: &running}, false},
		{"up, one at 0", scaler.Up, map[string]*state{kcm: &running, mcm: &stopped, ca: &running}, true},
		{"up, one at 0 without annotations", scaler.Up,
			map[string]*state{kcm: &running, mcm: {}, ca: &running}, true},
		{"up, only an ignored one at 0", scaler.Up,
			map[string]*state{kcm: &running, mcm: {annotations: ignored}, ca: &running}, false},
		{"up, running but still annotated", scaler.Up,
			map[string]*state{kcm: {replicas: 2, annotations: marks("2")}, mcm: &running, ca: &running}, true},
		{"up, running with the meltdown annotation only", scaler.Up,
			map[string]*state{kcm: {replicas: 2, annotations: map[string]string{scaler.MeltdownProtectionAnnotation: ""}},
				mcm: &running, ca: &running}, true},
		{"up, running with a lone replicas annotation (left by the original)", scaler.Up,
			map[string]*state{kcm: {replicas: 2, annotations: map[string]string{scaler.ReplicasAnnotation: "2"}},
				mcm: &running, ca: &running}, false},
		{"up, ignored with the meltdown annotation", scaler.Up,
			map[string]*state{kcm: &running, mcm: {replicas: 1, annotations: ignoredMelted}, ca: &running}, true},
		{"up, optional missing", scaler.Up, map[string]*state{kcm: &running, mcm: &running}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, upstreamInfos(t))
			for name, s := range tt.resources {
				f.create(t, name, s.replicas, s.annotations)
			}
			got, err := f.scaler.NeedsScaling(context.Background(), f.ns, tt.dir)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			of, err := f.scaler.NeedsOf(context.Background(), f.ns, tt.dir)
			require.NoError(t, err)
			assert.Equal(t, tt.want, of.Scaling, "NeedsOf")
		})
	}
}

func TestInitialDelayOnTheClock(t *testing.T) {
	infos := withTimings(only(upstreamInfos(t), mcm), 10*time.Second, 30*time.Second)
	t.Run("waits until the clock has passed the delay", func(t *testing.T) {
		f := newFixture(t, infos)
		clk := clocktesting.NewFakeClock(time.Now())
		f.scaler.Clock = clk
		f.create(t, mcm, 2, nil)
		done := make(chan error, 1)
		go func() { done <- f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown) }()

		require.Eventually(t, clk.HasWaiters, 10*time.Second, 10*time.Millisecond)
		clk.Step(9 * time.Second)
		assert.True(t, clk.HasWaiters(), "still waiting")
		assert.Empty(t, f.journal.done())
		clk.Step(time.Second)
		require.Eventually(t, func() bool { return len(done) == 1 }, 10*time.Second, 10*time.Millisecond)

		require.NoError(t, <-done)
		assert.Equal(t, state{annotations: marks("2")}, f.state(t, mcm))
	})
	t.Run("cancelled during the delay", func(t *testing.T) {
		f := newFixture(t, infos)
		clk := clocktesting.NewFakeClock(time.Now())
		f.scaler.Clock = clk
		f.create(t, mcm, 2, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.scaler.Scale(ctx, f.ns, scaler.Down, meltdown) }()

		require.Eventually(t, clk.HasWaiters, 10*time.Second, 10*time.Millisecond)
		cancel()
		require.Eventually(t, func() bool { return len(done) == 1 }, 10*time.Second, 10*time.Millisecond)

		require.ErrorIs(t, <-done, context.Canceled)
		assert.Empty(t, f.journal.done())
		assert.Equal(t, state{replicas: 2}, f.state(t, mcm))
	})
}

func TestReadyWait(t *testing.T) {
	tests := []struct {
		name    string
		ready   bool
		timeout time.Duration
		min     time.Duration
		max     time.Duration
	}{
		{name: "no controller: bounded by the timeout", timeout: 2 * time.Second, min: time.Second, max: 10 * time.Second},
		{name: "replicas ready: returns at once", ready: true, timeout: time.Minute, max: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, withTimings(only(upstreamInfos(t), kcm), 0, tt.timeout))
			f.journal.ready = tt.ready
			f.create(t, kcm, 0, marks("2"))

			start := time.Now()
			require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Up, healthy))
			elapsed := time.Since(start)

			assert.Equal(t, state{replicas: 2}, f.state(t, kcm))
			assert.GreaterOrEqual(t, elapsed, tt.min)
			assert.Less(t, elapsed, tt.max)
		})
	}
}

func TestStatefulSet(t *testing.T) {
	infos := withoutDelays(only(upstreamInfos(t), kcm))
	infos[0].Ref.Kind = "StatefulSet"
	f := newFixture(t, infos)
	labels := map[string]string{"app": kcm}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: kcm},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), ServiceName: kcm,
			Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate(labels)},
	}
	require.NoError(t, env.Client.Create(context.Background(), sts))
	key := client.ObjectKeyFromObject(sts)

	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown))
	require.NoError(t, env.Client.Get(context.Background(), key, sts))
	assert.Equal(t, int32(0), *sts.Spec.Replicas)
	assert.Equal(t, "3", sts.Annotations[scaler.ReplicasAnnotation])

	sts.Status.ReadyReplicas = 3 // no controller runs: pretend the pods are ready
	sts.Status.Replicas = 3
	require.NoError(t, env.Client.Status().Update(context.Background(), sts))
	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Up, healthy))
	require.NoError(t, env.Client.Get(context.Background(), key, sts))
	assert.Equal(t, int32(3), *sts.Spec.Replicas)
	assert.NotContains(t, sts.Annotations, scaler.ReplicasAnnotation)
	assert.NotContains(t, sts.Annotations, scaler.MeltdownProtectionAnnotation)
}

func TestMelted(t *testing.T) {
	running := state{replicas: 1}
	stopped := state{annotations: marks("1")}
	for _, tt := range []struct {
		name      string
		resources map[string]*state // nil: missing
		want      bool
	}{
		{"all running", map[string]*state{kcm: &running, mcm: &running, ca: &running}, false},
		{"one at 0, marked", map[string]*state{kcm: &running, mcm: &stopped, ca: &running}, true},
		{"one at 0 without the marker", map[string]*state{kcm: &running, mcm: {}, ca: &running}, false},
		{"running, the marker kept", map[string]*state{kcm: {replicas: 2, annotations: map[string]string{scaler.MeltdownProtectionAnnotation: ""}}}, true},
		{"none", map[string]*state{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, upstreamInfos(t))
			for name, s := range tt.resources {
				f.create(t, name, s.replicas, s.annotations)
			}
			got, err := f.scaler.Melted(context.Background(), f.ns)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
