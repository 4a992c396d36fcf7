package weeder

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	windowsOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dwd_weeder_windows_open", Help: "Weeding windows whose pod watches run now.",
	})
	windowsQueued = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dwd_weeder_windows_queued", Help: "Weeding windows waiting for a free slot.",
	})
	windowsOpened = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_weeder_windows_opened_total", Help: "Weeding windows opened (not extended), by service.",
	}, []string{"service"})
	podsDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_weeder_pods_deleted_total", Help: "CrashLoopBackOff pods deleted, by the service whose readiness opened the window.",
	}, []string{"service"})
	deleteFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_weeder_pod_delete_failures_total", Help: "Pod deletions that failed (other than the pod being gone, replaced or changed), by service.",
	}, []string{"service"})
	deleteConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_weeder_pod_delete_conflicts_total",
		Help: "Pod deletions refused because the pod was replaced or changed since it was seen in CrashLoopBackOff (UID or resourceVersion precondition), by service.",
	}, []string{"service"})
)

// collectors are the weeder's metrics, all registered by registerMetrics.
var collectors = []prometheus.Collector{windowsOpen, windowsQueued, windowsOpened, podsDeleted, deleteFailures,
	deleteConflicts}

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() { metrics.Registry.MustRegister(collectors...) })
}

// initServiceMetrics exports the counters of service at zero, so that a rate over them is 0 rather
// than no data before its first window, deletion or failure.
func initServiceMetrics(service string) {
	for _, c := range []*prometheus.CounterVec{windowsOpened, podsDeleted, deleteFailures, deleteConflicts} {
		c.WithLabelValues(service)
	}
}
