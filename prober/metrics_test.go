package prober

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
)

// TestLastSuccessfulProbe: the gauge holds the start of the last cycle that succeeded, and goes when
// the probe stops. (dwd_shoot_scaled_down does not depend on the probe: see scaleddown_test.go.)
func TestLastSuccessfulProbe(t *testing.T) {
	ctx := context.Background()
	f := newCycleFixture(t, 3)
	f.m.Scheduler = NewScheduler(f.clk, 1, nil)
	f.m.probes = map[string]*shootProbe{cycleNS: f.p}
	unix := func(at time.Time) float64 { return float64(at.UnixNano()) / 1e9 }

	succeeded := func() float64 {
		return testutil.ToFloat64(probesTotal.WithLabelValues(resultNoDecision)) + testutil.ToFloat64(probesTotal.WithLabelValues(resultHealthy))
	}
	before := succeeded()
	start := f.clk.Now()
	f.p.run(ctx)
	require.InDelta(t, before+1, succeeded(), 0, "precondition: the first cycle succeeds")
	assert.InDelta(t, unix(start), testutil.ToFloat64(lastSuccess.WithLabelValues(cycleNS)), 1e-3)

	f.shoot.set(func(s *lyingShoot) { s.retryAfter = "1" })
	f.clk.Step(10 * time.Second)
	f.p.run(ctx)
	assert.InDelta(t, unix(start), testutil.ToFloat64(lastSuccess.WithLabelValues(cycleNS)), 1e-3, "a failed cycle is no success")

	f.m.mu.Lock()
	f.m.stopLocked(cycleNS)
	f.m.mu.Unlock()
	assert.False(t, lastSuccess.DeleteLabelValues(cycleNS), "the shoot's series is gone")
}

// TestProbeResultsStartAtZero: every result and inconclusive reason is exported from the start, so that
// a rate over one is 0 rather than no data until it first happens.
func TestProbeResultsStartAtZero(t *testing.T) {
	registerMetrics()
	for _, r := range []string{resultHealthy, resultScaledDown, resultScaledUp, resultAPIServer, resultThrottled,
		resultLeases, resultKubeconfig, resultScaleFailed, resultNoDecision, resultShootInvalid, resultInconclusive} {
		assert.Contains(t, metricstest.Series(probesTotal), map[string]string{"result": r})
	}
	for _, r := range []string{reasonTooLarge, reasonNotConfirmed, reasonStaleAnswer, reasonMemoryBudget} {
		assert.Contains(t, metricstest.Series(inconclusiveTotal), map[string]string{"reason": r})
	}
}
