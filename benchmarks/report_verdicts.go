package benchmarks

import (
	"fmt"
	"strings"
)

// Profile is the prober timings and client limits a scenario's replicas ran with: the bench's own
// (the probe interval of --probe-interval) or Gardener's (probeInterval 30s).
type Profile struct {
	Name                 string  `json:"name"`
	ProbeIntervalSeconds float64 `json:"probe_interval_seconds"`
	// GraceSeconds is kcmNodeMonitorGraceDuration: a lease counts as expired 0.75 × that after its
	// last renewal.
	GraceSeconds        float64 `json:"grace_seconds"`
	ProbeTimeoutSeconds float64 `json:"probe_timeout_seconds"`
	// MCMScaleUpDelaySeconds is machine-controller-manager's scaleUp initialDelay.
	MCMScaleUpDelaySeconds float64      `json:"mcm_scale_up_delay_seconds"`
	Client                 ClientLimits `json:"client"`
}

// String is the profile in one line.
func (p Profile) String() string {
	return fmt.Sprintf("%s: interval %g s, grace %g s, probe timeout %g s, MCM scale-up delay %g s, %s", p.Name,
		p.ProbeIntervalSeconds, p.GraceSeconds, p.ProbeTimeoutSeconds, p.MCMScaleUpDelaySeconds, p.Client)
}

// Blip is the blip scenario at one profile and replica count: the kubelets of part of the seed's shoots
// stop renewing long enough for the prober to find them (their leases freeze at the last renewal),
// then all renew again. What the replicas write after the recovery is what the shoots' latest probes
// contradict. Writes are counted as the seed's Deployment watch shows them (a little after they were
// sent), times from the moment the bench let the kubelets renew again.
type Blip struct {
	Profile    Profile `json:"profile"`
	SeedShoots int     `json:"seed_shoots"`
	Melted     int     `json:"melted"`
	Replicas   int     `json:"replicas"`
	// OutageSeconds is how long the kubelets did not renew.
	OutageSeconds float64 `json:"outage_seconds"`
	// ScaledDownDuringOutage counts the melted shoots with a dependent scaled below its replicas before
	// the recovery: those the prober found in time.
	ScaledDownDuringOutage int `json:"scaled_down_during_outage"`
	// ScaleDownWritesAfterRecovery counts the writes that lowered a dependent's replicas after the
	// recovery; LateScaleDownWrites those later than LateLimitSeconds (a probe interval and 5 s) after
	// the shoot's kubelets renewed again (no probe can find it healthy before; a resumed kubelet renews
	// within its renew interval), on LateScaleDownShoots shoots, the last LateScaleDownMaxSeconds after
	// that renewal. LateFromRecoveryWrites counts those later than the limit after the recovery itself,
	// and RenewedAgainMaxSeconds is when the last shoot's kubelets renewed again after it.
	ScaleDownWritesAfterRecovery int     `json:"scale_down_writes_after_recovery"`
	LateLimitSeconds             float64 `json:"late_limit_seconds"`
	LateScaleDownWrites          int     `json:"late_scale_down_writes"`
	LateScaleDownShoots          int     `json:"late_scale_down_shoots"`
	LateScaleDownMaxSeconds      float64 `json:"late_scale_down_max_seconds"`
	LateFromRecoveryWrites       int     `json:"late_from_recovery_writes"`
	RenewedAgainMaxSeconds       float64 `json:"renewed_again_max_seconds"`
	// ShootsAtZero counts the melted shoots with a dependent at 0 replicas AtZeroAfterSeconds (3 probe
	// intervals) after the recovery.
	ShootsAtZero       int     `json:"shoots_at_zero"`
	AtZeroAfterSeconds float64 `json:"at_zero_after_seconds"`
	// WritesBeforeAtZero counts the scale writes (either way) the seed showed from the recovery to that
	// count, and WriteBudgetBeforeAtZero is what the replicas' scale budgets allowed in that time (rate
	// × time, each, and the tokens they held at the recovery: BudgetTokensAtRecovery, each between 0
	// and the burst, or the whole burst of a replica missing from it): how far the write budget, not the
	// decisions, kept shoots at 0.
	WritesBeforeAtZero      int     `json:"writes_before_at_zero"`
	WriteBudgetBeforeAtZero float64 `json:"write_budget_before_at_zero"`
	// BudgetTokensAtRecovery are the replicas' dwd_scale_budget_tokens right after the recovery
	// (below zero: scale-downs reserved ahead), by replica; a replica that does not export it (a dwd
	// before it) or could not be scraped is missing.
	BudgetTokensAtRecovery map[string]float64 `json:"budget_tokens_at_recovery,omitempty"`
	// Restoring counts the shoots that had a dependent scaled down since the melt; for them, the time
	// from the recovery until all dependents were back at their replicas for the last time (those not
	// back within RestoreTimeoutSeconds count as that, NotRestored counts them).
	Restoring             int     `json:"restoring"`
	RestoredP50Seconds    float64 `json:"restored_p50_seconds"`
	RestoredP99Seconds    float64 `json:"restored_p99_seconds"`
	RestoredMaxSeconds    float64 `json:"restored_max_seconds"`
	NotRestored           int     `json:"not_restored"`
	RestoreTimeoutSeconds float64 `json:"restore_timeout_seconds"`
	// RestoreFloorSeconds is the least time the restoring writes take under the replicas' scale
	// budgets, after their bursts, for all melted shoots (one write per dependent).
	RestoreFloorSeconds float64 `json:"restore_floor_seconds"`
	// WatchedSeconds is how long after the recovery the writes were watched.
	WatchedSeconds float64 `json:"watched_seconds"`
	// The replicas' probe lag and missed cycles from the melt to the end of the watch.
	ProbeLagP99Seconds float64 `json:"probe_lag_p99_seconds"`
	MissedCycles       float64 `json:"missed_cycles"`
}

// Detection is the detection scenario at one profile: in each case some shoots' kubelets stop
// renewing at once (T0), with an event on the replica that owns them, and the time until the first
// write that scales each shoot down is set against the original's figure for the same case.
type Detection struct {
	Profile    Profile `json:"profile"`
	SeedShoots int     `json:"seed_shoots"`
	Replicas   int     `json:"replicas"`
	// Rounds of ShootsPerRound shoots each, all owned by one replica, per case.
	Rounds         int             `json:"rounds"`
	ShootsPerRound int             `json:"shoots_per_round"`
	Cases          []DetectionCase `json:"cases"`
}

// DetectionCase is one case of the detection scenario.
type DetectionCase struct {
	Case string `json:"case"`
	// Samples counts the shoots melted; NotScaledDown those without a scale-down write within
	// TimeoutSeconds of T0, which count as that in the quantiles.
	Samples        int     `json:"samples"`
	NotScaledDown  int     `json:"not_scaled_down"`
	TimeoutSeconds float64 `json:"timeout_seconds"`
	// From T0, the moment the kubelets stopped renewing (as the original's figures count), to the
	// shoot's first scale-down write; and from the latest renewal of its melted leases (up to a kubelet
	// renew interval before T0) to the same write.
	P50Seconds                float64   `json:"p50_seconds"`
	P99Seconds                float64   `json:"p99_seconds"`
	Seconds                   []float64 `json:"seconds"`
	FromLastRenewalP50Seconds float64   `json:"from_last_renewal_p50_seconds"`
	FromLastRenewalP99Seconds float64   `json:"from_last_renewal_p99_seconds"`
	// Original is the case the original's figures are taken from, and its p50 / p99 from T0 at this
	// profile's probe interval, computed from its rule; zero when there is none for the interval.
	Original           string  `json:"original"`
	OriginalP50Seconds float64 `json:"original_p50_seconds"`
	OriginalP99Seconds float64 `json:"original_p99_seconds"`
	// KCMAfterMCMSeconds are, per shoot whose dependents were all written, the seconds from the later of
	// the machine-controller-manager and cluster-autoscaler writes (level 0) to the
	// kube-controller-manager write (level 1).
	KCMAfterMCMSeconds    []float64 `json:"kcm_after_mcm_seconds"`
	KCMAfterMCMP50Seconds float64   `json:"kcm_after_mcm_p50_seconds"`
	KCMAfterMCMP99Seconds float64   `json:"kcm_after_mcm_p99_seconds"`
	// KCMNotWritten counts the shoots with both level 0 writes but no kube-controller-manager write
	// within TimeoutSeconds of T0.
	KCMNotWritten int `json:"kcm_not_written"`
}

// writeVerdicts writes the blip and detection sections.
func (r *Result) writeVerdicts(b *strings.Builder) {
	if len(r.Blips) > 0 {
		b.WriteString("\n## Blip\n\nThe kubelets of the melted shoots stop renewing for the outage, then renew again (the recovery), each within its renew interval; writes as the seed's Deployment watch shows them, times from the recovery. A scale-down write is late when it comes more than the limit after the shoot's kubelets renewed again; the column after counts those more than the limit after the recovery itself.\n\n")
		b.WriteString("| profile | seed shoots | melted | replicas | outage s | scaled down during it | scale-down writes after recovery | kubelets renewed again by s | late (> limit s after the renewal): writes, shoots, last s | > limit after the recovery | at 0 after s | writes / budget until then | restoring | restored p50 / p99 / max s | not restored | lag p99 s | missed cycles |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range r.Blips {
			fmt.Fprintf(b, "| %s | %d | %d | %d | %.0f | %d | %d | %.1f | %d, %d, %.1f (> %.0f) | %d | %d (%.0f) | %d / %.0f | %d | %.1f / %.1f / %.1f | %d | %.3f | %.0f |\n",
				x.Profile.Name, x.SeedShoots, x.Melted, x.Replicas, x.OutageSeconds, x.ScaledDownDuringOutage, x.ScaleDownWritesAfterRecovery,
				x.RenewedAgainMaxSeconds, x.LateScaleDownWrites, x.LateScaleDownShoots, x.LateScaleDownMaxSeconds, x.LateLimitSeconds,
				x.LateFromRecoveryWrites, x.ShootsAtZero, x.AtZeroAfterSeconds, x.WritesBeforeAtZero, x.WriteBudgetBeforeAtZero,
				x.Restoring, x.RestoredP50Seconds, x.RestoredP99Seconds, x.RestoredMaxSeconds, x.NotRestored, x.ProbeLagP99Seconds, x.MissedCycles)
		}
	}
	for _, d := range r.Detection {
		fmt.Fprintf(b, "\n## Detection, %s\n\n%d shoots, %d replicas; per case %d rounds of %d shoots owned by one replica. Seconds from T0 (the kubelets stop renewing) to each shoot's first scale-down write; the original's computed from its rule (docs/benchmarks.md, \"The verdict scenarios\").\n\n",
			d.Profile, d.SeedShoots, d.Replicas, d.Rounds, d.ShootsPerRound)
		b.WriteString("| case | samples | p50 / p99 s | original p50 / p99 s (case) | from last renewal p50 / p99 s | not scaled down | KCM after MCM/CA p50 / p99 s (not written) |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")
		for _, c := range d.Cases {
			fmt.Fprintf(b, "| %s | %d | %.1f / %.1f | %s | %.1f / %.1f | %d (in %.0f s) | %.2f / %.2f (%d) |\n", c.Case, c.Samples, c.P50Seconds, c.P99Seconds,
				original(c), c.FromLastRenewalP50Seconds, c.FromLastRenewalP99Seconds, c.NotScaledDown, c.TimeoutSeconds,
				c.KCMAfterMCMP50Seconds, c.KCMAfterMCMP99Seconds, c.KCMNotWritten)
		}
	}
}

// original formats the original's figures of a case, or a dash when the table has none.
func original(c DetectionCase) string {
	if c.Original == "" {
		return "–"
	}
	return fmt.Sprintf("%.1f / %.1f (%s)", c.OriginalP50Seconds, c.OriginalP99Seconds, c.Original)
}
