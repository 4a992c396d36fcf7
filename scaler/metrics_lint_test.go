package scaler

import (
	"testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
)

// TestMetricsLint checks the package's metrics against Prometheus' naming rules (promlint).
func TestMetricsLint(t *testing.T) {
	metricstest.Lint(t, nil, append(collectors, budgetTokens)...)
}
