package prober

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// cyclesUntil runs probe cycles 10 s apart until done holds after one, at most n of them.
func (f *cycleFixture) cyclesUntil(t *testing.T, n int, done func(result string) bool) []string {
	t.Helper()
	var results []string
	for range n {
		result, _ := f.p.cycle(context.Background())
		results = append(results, result)
		f.clk.Step(10 * time.Second)
		if done(result) {
			return results
		}
	}
	require.FailNow(t, "condition not reached", "results: %v", results)
	return nil
}

// pendingFlow returns the shoot's flow, which the fixture never runs by itself.
func (f *cycleFixture) pendingFlow(t *testing.T, dir scaler.Direction) *scaler.Flow {
	t.Helper()
	f.m.flowMu.Lock()
	defer f.m.flowMu.Unlock()
	fl, ok := f.m.flows[cycleNS]
	require.True(t, ok, "a flow was started")
	require.Equal(t, dir, fl.Direction())
	return fl
}

// finish runs flow fl's job to its end, the fake clock following its waits, as the flow pool would
// have had it kept running (a step in flight, or one whose removal raced with it).
func (f *cycleFixture) finish(t *testing.T, fl *scaler.Flow) {
	t.Helper()
	job := f.m.flowJob(cycleNS, fl)
	for range 100 {
		next := job(context.Background())
		if next == Done {
			return
		}
		f.clk.Step(max(next, time.Millisecond))
	}
	require.FailNow(t, "the flow did not end")
}

// dependentsState returns the dependents' replicas and annotations, by name.
func (f *cycleFixture) dependentsState(t *testing.T) map[string]string {
	t.Helper()
	state := map[string]string{}
	for _, name := range cycleDependents {
		d := &appsv1.Deployment{}
		require.NoError(t, f.m.Scaler.Client.Get(context.Background(), client.ObjectKey{Namespace: cycleNS, Name: name}, d))
		state[name] = fmt.Sprintf("replicas=%d annotations=%v", *d.Spec.Replicas, d.Annotations)
	}
	return state
}

// A scale-down found during an outage but still waiting for the scale budget when the shoot recovers
// must not write: the recovery's ScaleUp verdict ends it, and a step of it that runs anyway (it was in
// flight) sends nothing.
func TestARecoveryCancelsAPendingScaleDown(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(f *cycleFixture)
	}{
		{name: "the budget is spent", setup: func(f *cycleFixture) { f.m.Scaler.Limiter = &blockingLimiter{} }},
		{name: "a scale-down initial delay", setup: func(f *cycleFixture) {
			for i := range f.m.Scaler.Resources {
				f.m.Scaler.Resources[i].ScaleDown.InitialDelay = &metav1.Duration{Duration: 30 * time.Second}
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newCycleFixture(t, 5)
			tt.setup(f)
			writes := f.recordWrites()
			before := f.dependentsState(t)
			f.cycles(t, 3, 10*time.Second)
			f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
			f.cyclesUntil(t, 10, func(string) bool { _, ok := f.flowStarted(); return ok })
			down := f.pendingFlow(t, scaler.Down)
			// The flow takes its first step: it reserves its budget or waits its initial delay.
			_ = f.m.flowJob(cycleNS, down)(context.Background())
			require.Empty(t, writes())

			f.shoot.set(func(s *lyingShoot) { s.meltedAt = time.Time{} })
			results := f.cyclesUntil(t, 5, func(r string) bool { return r == resultHealthy })
			_, running := f.flowStarted()
			assert.False(t, running, "the recovery ended the scale-down: %v", results)
			f.m.Scaler.Limiter = nil
			f.finish(t, down)
			assert.Empty(t, writes(), "no write after the recovery")
			assert.Equal(t, before, f.dependentsState(t))
		})
	}
}

// The mirror: a scale-up found while the shoot is scaled down but still waiting for its budget when
// the kubelets fail again must not bring kube-controller-manager back during the meltdown.
func TestARelapseCancelsAPendingScaleUp(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.scaledDown(t)
	f.m.Scaler.Limiter = &blockingLimiter{}
	writes := f.recordWrites()
	before := f.dependentsState(t)
	f.cyclesUntil(t, 10, func(string) bool { _, ok := f.flowStarted(); return ok })
	up := f.pendingFlow(t, scaler.Up)
	_ = f.m.flowJob(cycleNS, up)(context.Background())
	require.Empty(t, writes())

	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	results := f.cyclesUntil(t, 10, func(r string) bool { return r == resultHealthy })
	_, running := f.flowStarted()
	assert.False(t, running, "the relapse ended the scale-up: %v", results)
	f.m.Scaler.Limiter = nil
	f.finish(t, up)
	assert.Empty(t, writes(), "no write after the relapse")
	assert.Equal(t, before, f.dependentsState(t))
}

// A verdict that no probe repeats for longer than a period and a cycle deadline (the probes fail, or
// decide nothing) stops standing: its flow writes nothing more.
func TestAVerdictNotRepeatedStopsStanding(t *testing.T) {
	f := newCycleFixture(t, 1)
	epoch := f.m.publish(cycleNS, scaler.Down)
	assert.True(t, f.m.current(cycleNS, scaler.Down, epoch))
	assert.False(t, f.m.current(cycleNS, scaler.Up, epoch))
	f.clk.Step(f.m.verdictTTL())
	assert.True(t, f.m.current(cycleNS, scaler.Down, epoch), "repeated in time")
	f.clk.Step(time.Millisecond)
	assert.False(t, f.m.current(cycleNS, scaler.Down, epoch), "not repeated for too long")
	assert.Equal(t, epoch, f.m.publish(cycleNS, scaler.Down), "the same direction keeps its epoch")
	assert.True(t, f.m.current(cycleNS, scaler.Down, epoch))
	up := f.m.publish(cycleNS, scaler.Up)
	assert.NotEqual(t, epoch, up)
	assert.False(t, f.m.current(cycleNS, scaler.Down, epoch))
	assert.NotEqual(t, up, f.m.publish(cycleNS, scaler.Down), "a new verdict down is not the old one")
	f.m.forgetVerdict(cycleNS)
	assert.False(t, f.m.current(cycleNS, scaler.Down, epoch+2), "a stopped probe's flows write nothing")
}

// recheckFixture is a cycle fixture at the given probe interval whose cycles run one after the
// other, the fake clock stepping by the wait each returns, as the scheduler would.
type recheckFixture struct {
	*cycleFixture
	t *testing.T
}

func newRecheckFixture(t *testing.T, interval time.Duration) recheckFixture {
	f := newCycleFixture(t, 5)
	f.m.Config.ProbeInterval = &metav1.Duration{Duration: interval}
	r := recheckFixture{f, t}
	for range 3 { // the first reads may come early, until the clocks are trusted
		r.run()
	}
	return r
}

// run runs a cycle and returns the wait until the next.
func (r recheckFixture) run() time.Duration {
	next := r.p.run(context.Background())
	r.clk.Step(next)
	return next
}

// until runs cycles until the shoot's verdict is dir.
func (r recheckFixture) until(dir scaler.Direction) {
	r.t.Helper()
	for range 20 {
		if r.run(); r.m.standing(cycleNS, dir) {
			return
		}
	}
	require.FailNow(r.t, "no verdict", "%v", dir)
}

// At Gardener's 30 s interval a shoot scaled down is read again after about a kubelet renewal
// (downRecheck, jittered), so that its recovery is found, and its controllers come back, up to 20 s
// sooner; a healthy shoot keeps its period, and so does the shoot once it recovered.
func TestAShootScaledDownIsReadAgainWithinAKubeletRenewal(t *testing.T) {
	r := newRecheckFixture(t, 30*time.Second)
	next := r.run()
	require.GreaterOrEqual(t, next, 27*time.Second, "a healthy shoot waits its period (30 s ± 10 %)")

	r.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	r.until(scaler.Down)
	early := testutil.ToFloat64(earlyRuns)
	for range 3 {
		next := r.run()
		require.True(t, r.m.standing(cycleNS, scaler.Down))
		assert.LessOrEqual(t, next, 11*time.Second, "a shoot whose verdict is a scale-down is read after about a kubelet renewal")
	}
	assert.GreaterOrEqual(t, testutil.ToFloat64(earlyRuns)-early, 3.0, "each such read is counted")

	r.shoot.set(func(s *lyingShoot) { s.meltedAt = time.Time{} })
	r.until(scaler.Up)
	assert.GreaterOrEqual(t, r.run(), 27*time.Second, "a recovered shoot waits its period again")
}

// A shoot whose dependents carry the meltdown marker is read after about a kubelet renewal whatever
// its verdict here: scaled down by an earlier owner or process (a takeover, a restart), or on its
// way back up.
func TestAShootWhoseDependentsAreMarkedIsReadAgainWithinAKubeletRenewal(t *testing.T) {
	r := newRecheckFixture(t, 30*time.Second)
	r.scaledDown(t)
	assert.LessOrEqual(t, r.run(), 11*time.Second)
	assert.False(t, r.m.standing(cycleNS, scaler.Down), "the kubelets renew: no scale-down verdict")
}

// A shoot scaled down whose reads fail is read at its period: its API server out of reach gets no
// more requests than the original sends it.
func TestAScaledDownShootThatCannotBeReadWaitsItsPeriod(t *testing.T) {
	r := newRecheckFixture(t, 30*time.Second)
	r.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	r.until(scaler.Down)
	r.shoot.set(func(s *lyingShoot) { s.body = []byte("not json") })
	for range 2 {
		assert.GreaterOrEqual(t, r.run(), 27*time.Second)
	}
}

// At a probe interval of 10 s or less nothing changes: a shoot scaled down is read at its period.
func TestAtTenSecondsAShootScaledDownWaitsItsPeriod(t *testing.T) {
	r := newRecheckFixture(t, 10*time.Second)
	r.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	r.until(scaler.Down)
	early := testutil.ToFloat64(earlyRuns)
	for range 10 {
		r.run()
	}
	assert.Zero(t, testutil.ToFloat64(earlyRuns)-early, "no early run")
}
