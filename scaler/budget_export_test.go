package scaler

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// dwd_scale_budget_tokens is not among the metrics registered at init: a process without a prober (the
// weeder alone) would export an empty budget. The first Export registers it.
func TestTheBudgetGaugeIsRegisteredByExport(t *testing.T) {
	assert.False(t, slices.Contains(collectors, prometheus.Collector(budgetTokens)), "registered at init")
	NewTokenBucket(1, 5).Export(clocktesting.NewFakePassiveClock(time.Now()))
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(families, func(f *dto.MetricFamily) bool {
		return f.GetName() == "dwd_scale_budget_tokens"
	}), "registered by Export")
}
