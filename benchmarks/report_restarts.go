package benchmarks

import (
	"fmt"
	"strings"
)

// PartitionWrites counts the writes of partition Leases (labelled dwd.gardener.cloud/lease-kind=
// partition) in a window, as the seed's watch events show them, by what each did to the holder.
type PartitionWrites struct {
	Total int `json:"total"`
	// Creates made a partition lease (with a holder).
	Creates int `json:"creates"`
	// Acquires set a holder other than the one before (none included).
	Acquires int `json:"acquires"`
	// Releases cleared the holder.
	Releases int `json:"releases"`
	// Rewrites kept the holder (a renewal, or a new process of the same member claiming it again).
	Rewrites int `json:"rewrites"`
}

// String is the writes in one line.
func (w PartitionWrites) String() string {
	return fmt.Sprintf("%d (%d creates, %d acquires, %d releases, %d rewrites)", w.Total, w.Creates, w.Acquires, w.Releases, w.Rewrites)
}

// Rolling is the rolling scenario: every replica restarts in turn, from the highest ordinal down, as a
// StatefulSet's rolling update does it: SIGTERM, wait for the exit, start a new process under the same
// member name, wait until its /readyz answers 200, then the next. The window runs from the first
// SIGTERM until every shoot was probed by its owner's new process, and SettleSeconds more.
type Rolling struct {
	Shoots   int `json:"shoots"`
	Replicas int `json:"replicas"`
	// LeaveMode is the --leave-mode the replicas ran with; empty when the dwd binary has no such flag.
	LeaveMode string `json:"leave_mode,omitempty"`
	// HandedOver counts the shoots probed in the window by a replica other than their owner before it
	// (by the shoot server's User-Agents).
	HandedOver int `json:"handed_over"`
	// The probe gaps: per shoot, the longest time between two probes in a row by any replica (a probe
	// is a GET /version on the shoot's API server) of which the second came in the window, or the time
	// since its last probe at the window's end if longer.
	LongestGapSeconds float64 `json:"longest_gap_seconds"`
	GapP50Seconds     float64 `json:"gap_p50_seconds"`
	GapP99Seconds     float64 `json:"gap_p99_seconds"`
	// GapsOverLimit counts the shoots whose longest gap is above GapLimitSeconds (1.5 × the probe
	// interval).
	GapsOverLimit   int     `json:"gaps_over_limit"`
	GapLimitSeconds float64 `json:"gap_limit_seconds"`
	// RolloutSeconds runs from the first SIGTERM until the last replica was ready; ResumedSeconds
	// until every shoot was seen probed by its owner's new process (polled once a second).
	RolloutSeconds float64 `json:"rollout_seconds"`
	ResumedSeconds float64 `json:"resumed_seconds"`
	// NotResumed counts the shoots not probed by their owner's new process within
	// ResumeTimeoutSeconds of the last ready.
	NotResumed           int     `json:"not_resumed"`
	ResumeTimeoutSeconds float64 `json:"resume_timeout_seconds"`
	// SettleSeconds is how long the window stays open after the resume: the return grace and a probe
	// interval, in which a late takeover would show.
	SettleSeconds float64 `json:"settle_seconds"`
	// PartitionLeaseWrites are the partition lease writes in the window.
	PartitionLeaseWrites PartitionWrites  `json:"partition_lease_writes"`
	Restarts             []RollingRestart `json:"restarts"`
}

// RollingRestart is one replica's restart in the rollout.
type RollingRestart struct {
	Replica string `json:"replica"`
	// StopSeconds runs from SIGTERM to the process's exit; Killed says it did not exit within
	// 30 s and was killed.
	StopSeconds float64 `json:"stop_seconds"`
	Killed      bool    `json:"killed,omitempty"`
	// ReadySeconds runs from the new process's start to its first /readyz 200 (polled every 100 ms).
	ReadySeconds float64 `json:"ready_seconds"`
	// Shoots it probed before the rollout, and the longest probe gap among them.
	Shoots            int     `json:"shoots"`
	LongestGapSeconds float64 `json:"longest_gap_seconds"`
}

// Outage is the outage scenario: every replica loses the seed's API server (each reaches it through
// a loopback proxy, cut for all at once) for a while, and it comes back.
type Outage struct {
	Shoots   int `json:"shoots"`
	Replicas int `json:"replicas"`
	// OutageSeconds is how long the proxies were cut; CutAfterSeconds how long after every shoot was
	// probed by the replicas' start they were cut (at least the weeder's watchDuration).
	OutageSeconds   float64 `json:"outage_seconds"`
	CutAfterSeconds float64 `json:"cut_after_seconds"`
	// ResumedSeconds runs from the heal until every shoot was probed again by its owner before the
	// outage (the shoot server's clock); the quantiles are over the shoots.
	ResumedSeconds    float64 `json:"resumed_seconds"`
	ResumedP50Seconds float64 `json:"resumed_p50_seconds"`
	ResumedP99Seconds float64 `json:"resumed_p99_seconds"`
	// NotResumed counts the shoots their owner did not probe again within ResumeTimeoutSeconds.
	NotResumed           int     `json:"not_resumed"`
	ResumeTimeoutSeconds float64 `json:"resume_timeout_seconds"`
	// ReadySeconds runs from the heal until every replica's /readyz answered 200 (polled every 250 ms);
	// -1 when one never did in the window.
	ReadySeconds float64 `json:"ready_seconds"`
	// ProbedByOthers counts the shoots probed after the heal by a replica other than their owner
	// before the outage.
	ProbedByOthers int `json:"probed_by_others"`
	// PartitionsMoved counts the partitions whose holder after the resume differs from the one before
	// the outage; PartitionsHeldByOthers those held at any moment from the cut to the end by a member
	// other than their holder before.
	PartitionsMoved        int `json:"partitions_moved"`
	PartitionsHeldByOthers int `json:"partitions_held_by_others"`
	// The partition lease writes while cut, and from the heal to the end.
	PartitionLeaseWritesCut    PartitionWrites `json:"partition_lease_writes_cut"`
	PartitionLeaseWritesHealed PartitionWrites `json:"partition_lease_writes_healed"`
	// WeederWindowsOpenAtCut are the weeding windows open or queued at the cut: the cut waits until
	// those of the replicas' start have closed, for 2 minutes at most.
	WeederWindowsOpenAtCut float64 `json:"weeder_windows_open_at_cut"`
	// WeederWindowsOpened are the weeding windows opened from the heal to the end
	// (dwd_weeder_windows_opened_total), by service; no service changes readiness in the scenario.
	WeederWindowsOpened map[string]float64 `json:"weeder_windows_opened"`
	// ScaleWritesCut and ScaleWritesHealed count the changes of a dependent's replicas the seed's
	// watch showed while cut, and from the heal to the end.
	ScaleWritesCut    int `json:"scale_writes_cut"`
	ScaleWritesHealed int `json:"scale_writes_healed"`
	// SelfFencings are the replicas' dwd_sharding_self_fencing_total increase over the scenario.
	SelfFencings float64 `json:"self_fencings"`
	// Exited names the replicas whose process ended while cut; they were started again at once, as a
	// kubelet would.
	Exited []string `json:"exited,omitempty"`
	// SettleSeconds is how long after the resume the window was kept open for late writes and windows.
	SettleSeconds float64 `json:"settle_seconds"`
}

// writeRestarts writes the rolling and outage sections.
func (r *Result) writeRestarts(b *strings.Builder) {
	if x := r.Rolling; x != nil {
		mode := x.LeaveMode
		if mode == "" {
			mode = "none (the binary has no --leave-mode)"
		}
		fmt.Fprintf(b, "\n## Rolling restart\n\n%d shoots, %d replicas restarted from the highest ordinal down, leave mode %s. "+
			"Window: the first SIGTERM until every shoot was probed by its owner's new process, and %.0f s more.\n\n", x.Shoots, x.Replicas, mode, x.SettleSeconds)
		fmt.Fprintf(b, "| shoots handed over | longest probe gap s | gap p50 / p99 s | shoots with a gap > %.0f s | rollout s | resumed s | not resumed | partition lease writes |\n|---|---|---|---|---|---|---|---|\n", x.GapLimitSeconds)
		fmt.Fprintf(b, "| %d | %.2f | %.2f / %.2f | %d | %.1f | %.1f | %d (in %.0f s) | %s |\n\n", x.HandedOver, x.LongestGapSeconds, x.GapP50Seconds,
			x.GapP99Seconds, x.GapsOverLimit, x.RolloutSeconds, x.ResumedSeconds, x.NotResumed, x.ResumeTimeoutSeconds, x.PartitionLeaseWrites)
		b.WriteString("| replica | SIGTERM → exit s | start → ready s | its shoots | their longest gap s |\n|---|---|---|---|---|\n")
		for _, rr := range x.Restarts {
			stop := fmt.Sprintf("%.2f", rr.StopSeconds)
			if rr.Killed {
				stop += " (killed)"
			}
			fmt.Fprintf(b, "| %s | %s | %.2f | %d | %.2f |\n", rr.Replica, stop, rr.ReadySeconds, rr.Shoots, rr.LongestGapSeconds)
		}
	}
	if x := r.Outage; x != nil {
		fmt.Fprintf(b, "\n## Seed API outage\n\n%d shoots, %d replicas cut from the seed's API server for %.0f s, %.0f s after their start settled, with %.0f weeding windows open; the window after the heal closes %.0f s after every shoot was probed again by its owner.\n\n",
			x.Shoots, x.Replicas, x.OutageSeconds, x.CutAfterSeconds, x.WeederWindowsOpenAtCut, x.SettleSeconds)
		b.WriteString("| resumed s (p50 / p99 / all) | not resumed | replicas ready s | probed by others | partitions moved (held by others meanwhile) | partition lease writes cut; healed | weeder windows opened | scale writes cut; healed | self-fencings | exited |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
		fmt.Fprintf(b, "| %.2f / %.2f / %.2f | %d (in %.0f s) | %.2f | %d | %d (%d) | %s; %s | %.0f (%s) | %d; %d | %.0f | %s |\n",
			x.ResumedP50Seconds, x.ResumedP99Seconds, x.ResumedSeconds, x.NotResumed, x.ResumeTimeoutSeconds, x.ReadySeconds, x.ProbedByOthers,
			x.PartitionsMoved, x.PartitionsHeldByOthers, x.PartitionLeaseWritesCut, x.PartitionLeaseWritesHealed, sumOf(x.WeederWindowsOpened),
			byKey(x.WeederWindowsOpened, "%.0f"), x.ScaleWritesCut, x.ScaleWritesHealed, x.SelfFencings, strings.Join(x.Exited, ", "))
	}
}

// sumOf adds up a map's values.
func sumOf(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}
