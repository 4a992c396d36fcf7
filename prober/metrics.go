package prober

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Probe results, the values of the result label of dwd_probes_total.
const (
	resultHealthy      = "healthy"          // leases healthy, nothing to scale
	resultScaledDown   = "scale_down"       // leases expired: a scale-down was needed and ran
	resultScaledUp     = "scale_up"         // leases recovered: a scale-up was needed and ran
	resultAPIServer    = "apiserver_failed" // the shoot's API server gave no answer
	resultThrottled    = "throttled"
	resultLeases       = "leases_failed" // listing nodes, leases or machines failed with an answer
	resultKubeconfig   = "kubeconfig_failed"
	resultScaleFailed  = "scale_failed"
	resultNoDecision   = "no_action" // exactly one candidate node: the original does nothing
	resultShootInvalid = "shoot_invalid"
	resultInconclusive = "inconclusive" // a read that cannot decide: see dwd_probe_inconclusive_total
)

var (
	probesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_probes_total", Help: "Probe cycles by result.",
	}, []string{"result"})
	probeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "dwd_probe_duration_seconds", Help: "Duration of one probe of a shoot's leases (nodes, leases, decision); probe is leases.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	}, []string{"probe"})
	probeLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "dwd_probe_lag_seconds", Help: "How late a probe started against its scheduled time.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 2, 5, 10, 30, 60, 120},
	})
	missedCycles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dwd_probe_missed_cycles_total", Help: "Probe cycles that did not run because the probe before started a whole probe interval or more late.",
	})
	probesActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dwd_probes_active", Help: "Shoots this replica probes.",
	})
	probeIntervalSeconds = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dwd_prober_probe_interval_seconds",
		Help: "The prober config's probeInterval: how often each shoot is probed. The alert rules' thresholds on probes are multiples of it.",
	})
	unprotected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_shoots_unprotected",
		Help: "Shoots this replica owns and cannot probe although no lifecycle rule stops it, by reason: invalid_cluster (its Cluster holds no usable spec.shoot).",
	}, []string{"reason"})
	notProbed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_shoots_not_probed",
		Help: "Shoots this replica owns and does not probe because a lifecycle rule says so, by reason: cluster_gone, deleting, hibernated, migrating, no_workers, waking_up, no_last_operation, last_operation (a Create or Restore not succeeded, or another type).",
	}, []string{"reason"})
	expiredFraction = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_shoot_expired_lease_ratio", Help: "Fraction of candidate node leases found expired by the last probe of a shoot.",
	}, []string{"namespace"})
	lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_shoot_last_successful_probe_timestamp_seconds",
		Help: "Unix time of the start of the last probe cycle of a shoot that read its API server and node leases and decided.",
	}, []string{"namespace"})
	earlyRuns = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dwd_probe_early_runs_total",
		Help: "Probe cycles run before their period was over because the node leases could cross the expiry threshold earlier (the leases stopped, or look old and are not proven yet), or because the shoot is scaled down (read about every 10 s, a kubelet renewal, at a longer interval, to find its recovery).",
	})
	inconclusiveTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_probe_inconclusive_total", Help: "Probe cycles that decided nothing, by reason: too_large (an answer over the bounds), not_confirmed (a consistent read did not confirm a scale-down or a scale-up), stale_answer (renewTimes older than ones seen before), memory_budget (no room for an answer in the replica's budget of shoot answer bytes in flight).",
	}, []string{"reason"})
	clockOffset = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_shoot_clock_offset_seconds", Help: "The shoot API server's clock (its Date header, 1 s resolution) minus this replica's, at the last probe. Informational: expiry is judged by observation and does not depend on it.",
	}, []string{"namespace"})
	shootsInvalid = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_shoot_config_errors_total", Help: "Clusters or kubeconfig Secrets that could not be used, by kind.",
	}, []string{"kind"})
)

// collectors are the prober's metrics, registered by registerMetrics when a prober is set up, so
// that a process without one (a weeder) exports none of them: no probe count that looks like a
// stalled prober.
var collectors = []prometheus.Collector{probesTotal, probeDuration, probeLag, missedCycles, probesActive, notProbed, unprotected, probeIntervalSeconds,
	expiredFraction, shootsInvalid, inconclusiveTotal, clockOffset, lastSuccess, scaledDown, earlyRuns}

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(collectors...)
		// Every result and reason is exported from the start at zero, so that a rate over one is 0
		// rather than no data until it first happens.
		for _, r := range []string{resultHealthy, resultScaledDown, resultScaledUp, resultAPIServer, resultThrottled,
			resultLeases, resultKubeconfig, resultScaleFailed, resultNoDecision, resultShootInvalid, resultInconclusive} {
			probesTotal.WithLabelValues(r)
		}
		for _, r := range []string{reasonTooLarge, reasonNotConfirmed, reasonStaleAnswer, reasonMemoryBudget} {
			inconclusiveTotal.WithLabelValues(r)
		}
		for _, r := range []string{NotProbedGone, NotProbedDeleting, NotProbedHibernated, NotProbedMigrating,
			NotProbedNoWorkers, NotProbedWakingUp, NotProbedNoLastOperation, NotProbedLastOperation} {
			notProbed.WithLabelValues(r)
		}
		unprotected.WithLabelValues(UnprotectedInvalidCluster)
	})
}

// lagObserver observes how late probes start; a start a whole interval or more late counts as that many
// missed cycles.
func lagObserver(interval time.Duration) func(time.Duration) {
	return func(d time.Duration) {
		d = max(d, 0)
		probeLag.Observe(d.Seconds())
		if interval > 0 && d >= interval {
			missedCycles.Add(float64(d / interval))
		}
	}
}
