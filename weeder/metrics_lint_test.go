package weeder

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
)

// TestMetricsLint checks the package's metrics against Prometheus' naming rules (promlint).
func TestMetricsLint(t *testing.T) {
	metricstest.Lint(t, nil, collectors...)
}

// TestCountersOfAConfiguredServiceStartAtZero: a rate over a service's windows, deletions or failures
// is 0 before its first one, not no data (dashboards and alerts would show nothing).
func TestCountersOfAConfiguredServiceStartAtZero(t *testing.T) {
	cfg := &config.WeederConfig{ServicesAndDependantSelectors: map[string]config.DependantSelectors{
		"zero-service": {PodSelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"role": "x"}}}},
	}}
	_, err := newManager(Options{Config: cfg, MaxWindows: 1}, managerDeps{})
	require.NoError(t, err)
	for name, vec := range map[string]*prometheus.CounterVec{"windows opened": windowsOpened, "pods deleted": podsDeleted,
		"delete failures": deleteFailures, "delete conflicts": deleteConflicts} {
		assert.Contains(t, metricstest.Series(vec), map[string]string{"service": "zero-service"}, name)
	}
}
