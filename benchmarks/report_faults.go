package benchmarks

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ClientLimits are the seed request budgets a scenario's replicas ran with. The scale budget fields
// are zero when the flags were not passed (the binary has none, or the scenario keeps its defaults).
type ClientLimits struct {
	// KubeAPIQPS and KubeAPIBurst limit the seed client (--kube-api-qps/--kube-api-burst).
	KubeAPIQPS   float64 `json:"kube_api_qps"`
	KubeAPIBurst int     `json:"kube_api_burst"`
	// ScaleWorkers, ScaleQPS and ScaleBurst are --scale-workers, --scale-qps and --scale-burst.
	ScaleWorkers int     `json:"scale_workers,omitempty"`
	ScaleQPS     float64 `json:"scale_qps,omitempty"`
	ScaleBurst   int     `json:"scale_burst,omitempty"`
}

// String is the limits as flags.
func (c ClientLimits) String() string {
	s := fmt.Sprintf("qps %g, burst %d", c.KubeAPIQPS, c.KubeAPIBurst)
	if c.ScaleQPS > 0 {
		s += fmt.Sprintf("; scale workers %d, qps %g, burst %d", c.ScaleWorkers, c.ScaleQPS, c.ScaleBurst)
	}
	return s
}

// MassMeltdown is the mass-meltdown scenario: the node leases of many shoots expire at once.
type MassMeltdown struct {
	// OriginalLimits melts a few dozen shoots on one replica with the original's client limits.
	OriginalLimits *MeltdownBatch `json:"original_limits,omitempty"`
	// Recover melts part of a larger seed, on one and on several replicas, and recovers it.
	Recover []MeltdownBatch `json:"recover,omitempty"`
	// All melts every shoot of the seed.
	All *MeltdownBatch `json:"all,omitempty"`
}

// MeltdownBatch is one batch of shoots whose node leases all expired at once, and then renewed
// again. A shoot is scaled down when all its dependents are at 0 replicas, restored when all are
// back at their replicas, as watch events of the seed's Deployments show.
type MeltdownBatch struct {
	SeedShoots int          `json:"seed_shoots"`
	Melted     int          `json:"melted"`
	Replicas   int          `json:"replicas"`
	Client     ClientLimits `json:"client"`
	// MCMScaleUpDelaySeconds is machine-controller-manager's scaleUp initialDelay in the prober config.
	MCMScaleUpDelaySeconds float64 `json:"mcm_scale_up_delay_seconds"`
	// From the moment the leases expired until each shoot was scaled down.
	ScaledDownP50Seconds float64 `json:"scaled_down_p50_seconds"`
	ScaledDownP99Seconds float64 `json:"scaled_down_p99_seconds"`
	ScaledDownMaxSeconds float64 `json:"scaled_down_max_seconds"`
	// NotScaledDown counts the shoots not scaled down within ScaleDownTimeoutSeconds.
	NotScaledDown           int     `json:"not_scaled_down"`
	ScaleDownTimeoutSeconds float64 `json:"scale_down_timeout_seconds"`
	// ScaleDownFloorSeconds is the least time the scale-down writes take under the replicas' scale
	// budgets, after their bursts (one write per dependent).
	ScaleDownFloorSeconds float64 `json:"scale_down_floor_seconds"`
	// From the moment the leases renewed until each scaled-down shoot was restored.
	RestoredP50Seconds    float64 `json:"restored_p50_seconds"`
	RestoredP99Seconds    float64 `json:"restored_p99_seconds"`
	RestoredMaxSeconds    float64 `json:"restored_max_seconds"`
	NotRestored           int     `json:"not_restored"`
	RestoreTimeoutSeconds float64 `json:"restore_timeout_seconds"`
	RestoreFloorSeconds   float64 `json:"restore_floor_seconds"`
	// The replicas' probe lag and missed cycles from the melt until the last restore.
	ProbeLagP99Seconds float64 `json:"probe_lag_p99_seconds"`
	MissedCycles       float64 `json:"missed_cycles"`
	// SeedRequestsByClient are the replicas' seed requests from the melt until the last scale-down,
	// by client (dwd_api_requests_total{api="seed"}). Over the dependents scaled down:
	// SeedRequestsPerScaledResource counts all but the sharding client's (scale writes, their reads,
	// Events), ScalerRequestsPerScaledResource the scale client's alone (none for a binary without one).
	SeedRequestsByClient            map[string]float64 `json:"seed_requests_by_client"`
	SeedRequestsPerScaledResource   float64            `json:"seed_requests_per_scaled_resource"`
	ScalerRequestsPerScaledResource float64            `json:"scaler_requests_per_scaled_resource"`
}

// Lies is the lies scenario: every shoot's API server tells one lie after the other, none of which
// may scale anything down.
type Lies struct {
	Shoots              int          `json:"shoots"`
	Replicas            int          `json:"replicas"`
	ProbeTimeoutSeconds float64      `json:"probe_timeout_seconds"`
	Client              ClientLimits `json:"client"`
	Parts               []LiePart    `json:"parts"`
}

// LiePart is one lie, told for a while and followed by a settling time in which its answers still
// in flight arrive.
type LiePart struct {
	Lie    string `json:"lie"`
	Shoots int    `json:"shoots"`
	// ExtraLeases are the Leases of no node in each lying shoot's lease list.
	ExtraLeases int     `json:"extra_leases,omitempty"`
	HeldSeconds float64 `json:"held_seconds"`
	// SpuriousScaleDowns counts the shoots with a dependent scaled below its replicas.
	SpuriousScaleDowns int `json:"spurious_scale_downs"`
	// ProbesByResult are the probes that ended meanwhile, by dwd_probes_total's result.
	ProbesByResult map[string]float64 `json:"probes_by_result"`
	// The shoots' lease lists meanwhile: consistent (fresh) and cached (resourceVersion=0) reads.
	ConsistentLeaseLists float64 `json:"consistent_lease_lists"`
	CachedLeaseLists     float64 `json:"cached_lease_lists"`
	MissedCycles         float64 `json:"missed_cycles"`
	// PeakRSSBytes is each replica's highest resident memory, sampled 5 times a second.
	PeakRSSBytes []float64 `json:"peak_rss_bytes"`
}

// writeFaults writes the mass-meltdown and lies sections.
func (r *Result) writeFaults(b *strings.Builder) {
	if m := r.MassMeltdown; m != nil {
		b.WriteString("\n## Mass meltdown\n\nTimes from the moment a melted shoot's leases had expired (or from the recovery) to all three dependents of the shoot at 0 (back at their replicas).\n\n")
		b.WriteString("| part | seed shoots | melted | replicas | client | scaled down p50 / p99 / max s | not scaled down | floor s | restored p50 / p99 / max s | not restored | lag p99 s | missed cycles | seed req per scaled resource: all, scaler (by client) |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		row := func(part string, x *MeltdownBatch) {
			fmt.Fprintf(b, "| %s | %d | %d | %d | %s | %.1f / %.1f / %.1f | %d (in %.0f s) | %.1f | %.1f / %.1f / %.1f | %d | %.3f | %.0f | %.2f, %.2f (%s) |\n",
				part, x.SeedShoots, x.Melted, x.Replicas, x.Client, x.ScaledDownP50Seconds, x.ScaledDownP99Seconds, x.ScaledDownMaxSeconds,
				x.NotScaledDown, x.ScaleDownTimeoutSeconds, x.ScaleDownFloorSeconds, x.RestoredP50Seconds, x.RestoredP99Seconds, x.RestoredMaxSeconds,
				x.NotRestored, x.ProbeLagP99Seconds, x.MissedCycles, x.SeedRequestsPerScaledResource, x.ScalerRequestsPerScaledResource,
				byKey(x.SeedRequestsByClient, "%.0f"))
		}
		if m.OriginalLimits != nil {
			row("original limits", m.OriginalLimits)
		}
		for i := range m.Recover {
			row("recover", &m.Recover[i])
		}
		if m.All != nil {
			row("all", m.All)
		}
	}
	if l := r.Lies; l != nil {
		fmt.Fprintf(b, "\n## Lies\n\n%d shoots, %d replicas, probe timeout %g s, %s.\n\n", l.Shoots, l.Replicas, l.ProbeTimeoutSeconds, l.Client)
		b.WriteString("| lie | shoots | held s | spurious scale-downs | probes by result | lease lists consistent / cached | missed cycles | peak RSS MiB (per replica) |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|\n")
		for _, p := range l.Parts {
			fmt.Fprintf(b, "| %s | %d | %.0f | %d | %s | %.0f / %.0f | %.0f | %s |\n", p.Lie, p.Shoots, p.HeldSeconds, p.SpuriousScaleDowns,
				byKey(p.ProbesByResult, "%.0f"), p.ConsistentLeaseLists, p.CachedLeaseLists, p.MissedCycles, list(p.PeakRSSBytes, "%.0f", 1<<20))
		}
	}
}

// byKey formats a map as "key value" pairs in key order.
func byKey(m map[string]float64, format string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+fmt.Sprintf(format, m[k]))
	}
	return strings.Join(parts, ", ")
}
