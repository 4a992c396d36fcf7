package access

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	missingRequired = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dwd_access_missing_permissions",
		Help: "Required permissions this replica does not have on the seed (or could not check yet); while above 0 the replica is not ready.",
	})
	// collectors are the access checker's metrics, all registered by registerMetrics.
	collectors   = []prometheus.Collector{missingRequired}
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { metrics.Registry.MustRegister(collectors...) })
}
