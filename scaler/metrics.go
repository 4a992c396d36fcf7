package scaler

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// The results of scaling one resource, the values of the result label.
const (
	resultSuccess = "success"
	resultSkipped = "skipped"
	resultFailed  = "failed"
)

// The scale metrics. They carry no member label: a process is one member, and Prometheus adds the labels
// of the pod it scrapes.
var (
	scaleOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_scale_operations_total",
		Help: "Scale operations on single resources by direction, resource (the dependent's name in the config) and result (success, skipped, failed).",
	}, []string{"direction", "resource", "result"})
	scaleDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dwd_scale_duration_seconds",
		Help:    "Duration of whole scale flows (all levels), by direction.",
		Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300},
	}, []string{"direction"})
	supersededWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_scale_writes_superseded_total",
		Help: "Scale writes not sent because the shoot's latest verdict no longer called for them (the flow ended), by direction.",
	}, []string{"direction"})
	budgetDeferrals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_scale_budget_deferrals_total",
		Help: "Requests to the scale budget (--scale-qps, --scale-burst) that it did not grant at once, by direction: a scale-down reserved a token due later, a scale-up was told to ask again (and counts again each time it asks). Rising for long: the budget is short for what the seed needs written.",
	}, []string{"direction"})
	budgetTokens = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dwd_scale_budget_tokens",
		Help: "Tokens in the scale budget now, at most --scale-burst; below zero, the scale-downs reserved ahead of the refill (each waits its turn, scale-ups wait for them). A scale-up takes only a whole free token and never reserves one, so a budget that paces scale-ups stays below one.",
	}, exportedTokens)
)

// collectors are the scale metrics registered at init; budgetTokens is registered by the first
// TokenBucket.Export, so that a process without a prober (the weeder alone) exports no budget.
var collectors = []prometheus.Collector{scaleOperations, scaleDuration, supersededWrites, budgetDeferrals}

func init() {
	metrics.Registry.MustRegister(collectors...)
}

// InitMetrics exports the scale counters and flow durations of the resources at zero, for both
// directions and every result, so that a rate over them is 0 rather than no data until its series has
// two samples: a series that appears with its first operations already counted shows no increase at
// all.
func InitMetrics(resources []config.DependentResourceInfo) {
	for _, dir := range []Direction{Down, Up} {
		supersededWrites.WithLabelValues(dir.String())
		budgetDeferrals.WithLabelValues(dir.String())
		scaleDuration.WithLabelValues(dir.String())
		for _, info := range resources {
			for _, result := range []string{resultSuccess, resultSkipped, resultFailed} {
				scaleOperations.WithLabelValues(dir.String(), job{info: info}.name(), result)
			}
		}
	}
}
