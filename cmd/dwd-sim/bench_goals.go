package main

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks"
)

// goals checks the figures against the goals the benchmarks must meet; a goal whose scenario did not
// run is left out.
func goals(r *benchmarks.Result) []benchmarks.Goal {
	var gs []benchmarks.Goal
	interval, lease := r.Settings.ProbeIntervalSeconds, r.Settings.MemberLeaseDurationSeconds
	if len(r.Steady) > 0 {
		largest := r.Steady[0]
		for _, s := range r.Steady {
			if s.Shoots > largest.Shoots || (s.Shoots == largest.Shoots && s.Replicas > largest.Replicas) {
				largest = s
			}
		}
		gs = append(gs, benchmarks.Goal{
			Goal:     fmt.Sprintf("probe lag at %d shoots, %d replicas", largest.Shoots, largest.Replicas),
			Target:   "p99 < 1 s, 0 missed cycles",
			Measured: fmt.Sprintf("p99 %.3f s, %.0f missed", largest.ProbeLagP99Seconds, largest.MissedCycles),
			Met:      largest.ProbeLagP99Seconds < 1 && largest.MissedCycles == 0,
		})
		// Membership renewals are a fixed 1/retryPeriod per replica, not a cost of probing: the goal is
		// checked with them at the largest load, and without them at every load.
		worst := slices.MaxFunc(r.Steady, func(a, b benchmarks.SteadyRun) int {
			return cmp.Compare(a.SeedWatchdogRequestsPerProbe, b.SeedWatchdogRequestsPerProbe)
		})
		gs = append(gs, benchmarks.Goal{
			Goal:   "seed requests per healthy probe",
			Target: "≤ 0.01",
			Measured: fmt.Sprintf("%.4f at %d shoots, %d replicas, membership renewals included; without them %.4f at worst (%d shoots, %d replicas)",
				largest.SeedRequestsPerProbe, largest.Shoots, largest.Replicas, worst.SeedWatchdogRequestsPerProbe, worst.Shoots, worst.Replicas),
			Met: largest.SeedRequestsPerProbe <= 0.01 && worst.SeedWatchdogRequestsPerProbe <= 0.01,
		})
		for _, many := range r.Steady {
			single := r.SteadyAt(many.Shoots, 1)
			if many.Replicas < 3 || single == nil {
				continue
			}
			ratio := slices.Max(many.CPUCores) / max(meanOf(single.CPUCores), 1e-9)
			gs = append(gs, benchmarks.Goal{
				Goal:     fmt.Sprintf("CPU of each of %d replicas over a single replica's, %d shoots", many.Replicas, many.Shoots),
				Target:   "≤ 0.40",
				Measured: fmt.Sprintf("%.2f (%.3f of %.3f cores)", ratio, slices.Max(many.CPUCores), meanOf(single.CPUCores)),
				Met:      ratio <= 0.40,
			})
		}
	}
	if h := r.Handover; h != nil {
		gs = append(gs, benchmarks.Goal{
			Goal: "graceful handover", Target: "p99 ≤ 2 s",
			Measured: fmt.Sprintf("p99 %.2f s", h.HandoverGracefulP99Seconds), Met: h.HandoverGracefulP99Seconds <= 2,
		}, benchmarks.Goal{
			Goal: "kill -9 handover", Target: fmt.Sprintf("p99 ≤ member lease + 2 s = %g s", lease+2),
			Measured: fmt.Sprintf("p99 %.2f s", h.HandoverKillP99Seconds), Met: h.HandoverKillP99Seconds <= lease+2,
		})
	}
	if m := r.Meltdown; m != nil {
		gs = append(gs, benchmarks.Goal{
			Goal: "meltdown detection to first scale-down", Target: fmt.Sprintf("p99 ≤ probe interval + 2 s = %g s", interval+2),
			Measured: fmt.Sprintf("p99 %.2f s", m.DetectionToScaledownP99Seconds), Met: m.DetectionToScaledownP99Seconds <= interval+2,
		})
	}
	return gs
}
