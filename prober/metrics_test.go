package prober

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLagObserverCountsWholeMissedCycles(t *testing.T) {
	observe := lagObserver(10 * time.Second)
	for _, tc := range []struct {
		lag    time.Duration
		missed float64
	}{
		{lag: -time.Second, missed: 0}, // a clock step backwards is no lag
		{lag: 0, missed: 0},
		{lag: 9999 * time.Millisecond, missed: 0},
		{lag: 10 * time.Second, missed: 1},
		{lag: 25 * time.Second, missed: 2},
	} {
		before := counterValue(t)
		observe(tc.lag)
		assert.Equal(t, tc.missed, counterValue(t)-before, "lag %s", tc.lag)
	}
}

func counterValue(t *testing.T) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, missedCycles.Write(m))
	return m.GetCounter().GetValue()
}

func TestJitterAroundCentresOnTheInterval(t *testing.T) {
	for _, tc := range []struct {
		factor, r float64
		want      time.Duration
	}{
		{factor: 0.2, r: 0, want: 9 * time.Second},
		{factor: 0.2, r: 0.5, want: 10 * time.Second},
		{factor: 0.2, r: 0.999999, want: 10999998 * time.Microsecond},
		{factor: 0, r: 0.7, want: 10 * time.Second},
		{factor: 3, r: 0, want: time.Second}, // never below a tenth of the interval
		{factor: 3, r: 0.999999, want: 24999976 * time.Microsecond},
	} {
		got := jitterAround(10*time.Second, tc.factor, tc.r)
		assert.InDelta(t, tc.want, got, float64(time.Microsecond), "factor %v, r %v", tc.factor, tc.r)
	}
}
