package scaler

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// The scale counters of the configured resources exist at zero before any operation, so that the
// first operations show as an increase.
func TestInitMetricsExportsTheCountersAtZero(t *testing.T) {
	const name = "init-metrics-dependent" // no other test scales a resource of this name
	before := testutil.CollectAndCount(scaleOperations)
	InitMetrics([]config.DependentResourceInfo{{Ref: &autoscalingv1.CrossVersionObjectReference{Name: name}}})
	require.Equal(t, before+6, testutil.CollectAndCount(scaleOperations), "two directions, three results")
	for _, dir := range []string{"down", "up"} {
		for _, result := range []string{resultSuccess, resultSkipped, resultFailed} {
			assert.Zero(t, testutil.ToFloat64(scaleOperations.WithLabelValues(dir, name, result)))
		}
	}
}
