package benchmarks

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// goals checks the figures against the goals the benchmarks must meet; a goal whose scenario did not
// run is left out.
func goals(r *Result) []Goal {
	interval, lease := r.Settings.ProbeIntervalSeconds, r.Settings.MemberLeaseDurationSeconds
	gs := steadyGoals(r)
	if h := r.Handover; h != nil {
		gs = append(gs, gracefulGoal(h))
		gs = append(gs, Goal{
			Goal: "kill -9 handover", Target: fmt.Sprintf("p99 ≤ member lease + 2 s = %g s", lease+2),
			Measured: fmt.Sprintf("p99 %.2f s", h.HandoverKillP99Seconds), Met: h.HandoverKillP99Seconds <= lease+2,
		})
	}
	if m := r.Meltdown; m != nil {
		gs = append(gs, Goal{
			Goal: "meltdown detection to first scale-down", Target: fmt.Sprintf("p99 ≤ probe interval + 2 s = %g s", interval+2),
			Measured: fmt.Sprintf("p99 %.2f s", m.DetectionToScaledownP99Seconds), Met: m.DetectionToScaledownP99Seconds <= interval+2,
		})
	}
	return append(gs, faultGoals(r, interval)...)
}

// gracefulGoal is the graceful handover's goal. Since a leave is announced and the leaving replica
// probes through its lead, the time from the signal includes that lead by design; what the goal
// protects is the moved shoots' probes, so it is measured by how late the most delayed one came
// (Handover.GracefulLateSeconds), with the time from the signal beside it. A result without that
// figure (before the announced leave) keeps the time from the signal.
func gracefulGoal(h *Handover) Goal {
	if len(h.GracefulLateSeconds) == 0 {
		return Goal{Goal: "graceful handover", Target: "p99 ≤ 2 s",
			Measured: fmt.Sprintf("p99 %.2f s", h.HandoverGracefulP99Seconds), Met: h.HandoverGracefulP99Seconds <= 2}
	}
	return Goal{Goal: "graceful handover: a moved shoot's probe later than an interval after the one before", Target: "p99 ≤ 2 s",
		Measured: fmt.Sprintf("p99 %.2f s (from the signal until every moved shoot was probed by its new owner, the announced lead included: p99 %.2f s)",
			h.HandoverGracefulLateP99, h.HandoverGracefulP99Seconds),
		Met: h.HandoverGracefulLateP99 <= 2}
}

// faultGoals are the goals of the fault, restart and verdict scenarios that ran.
func faultGoals(r *Result, interval float64) []Goal {
	var gs []Goal
	if m := r.MassMeltdown; m != nil {
		gs = append(gs, massGoals(m, interval)...)
	}
	if l := r.Lies; l != nil {
		gs = append(gs, liesGoals(l)...)
	}
	if x := r.Rolling; x != nil {
		gs = append(gs, rollingGoals(x, interval)...)
	}
	if x := r.Outage; x != nil {
		gs = append(gs, outageGoals(x)...)
	}
	for _, x := range r.Blips {
		gs = append(gs, blipGoals(x)...)
	}
	for _, d := range r.Detection {
		gs = append(gs, detectionGoals(d)...)
	}
	return gs
}

// steadyGoals are the goals of the steady runs, if any: probe lag and seed requests at the largest
// load, shoot requests, CPU per probe, and the CPU of a replica of many against a single one.
func steadyGoals(r *Result) []Goal {
	if len(r.Steady) == 0 {
		return nil
	}
	largest := r.Steady[0]
	for _, s := range r.Steady {
		if s.Shoots > largest.Shoots || (s.Shoots == largest.Shoots && s.Replicas > largest.Replicas) {
			largest = s
		}
	}
	// Membership renewals are a fixed 1/retryPeriod per replica, not a cost of probing: the goal is
	// checked with them at the largest load, and without them at every load.
	worst := slices.MaxFunc(r.Steady, func(a, b SteadyRun) int {
		return cmp.Compare(a.SeedWatchdogRequestsPerProbe, b.SeedWatchdogRequestsPerProbe)
	})
	gs := []Goal{{
		Goal:     fmt.Sprintf("probe lag at %d shoots, %d replicas", largest.Shoots, largest.Replicas),
		Target:   "p99 < 1 s, 0 missed cycles",
		Measured: fmt.Sprintf("p99 %.3f s, %.0f missed", largest.ProbeLagP99Seconds, largest.MissedCycles),
		Met:      largest.ProbeLagP99Seconds < 1 && largest.MissedCycles == 0,
	}, shootRequestsGoal(r.Steady), {
		Goal:   "seed requests per healthy probe",
		Target: "≤ 0.01",
		Measured: fmt.Sprintf("%.4f at %d shoots, %d replicas, membership renewals included; without them %.4f at worst (%d shoots, %d replicas)",
			largest.SeedRequestsPerProbe, largest.Shoots, largest.Replicas, worst.SeedWatchdogRequestsPerProbe, worst.Shoots, worst.Replicas),
		Met: largest.SeedRequestsPerProbe <= 0.01 && worst.SeedWatchdogRequestsPerProbe <= 0.01,
	}}
	gs = append(gs, cpuPerProbeGoals(r.Steady)...)
	gs = append(gs, replicaCPUGoals(r)...)
	return append(gs, replicaShareGoals(r)...)
}

// replicaShareGoals bound the memory of each of 3 or more replicas, and the seed objects its caches
// received, against a single replica's at the same number of shoots: each caches its share only
// (docs/caches.md). The objects received are bounded only where the seed's API server selects.
func replicaShareGoals(r *Result) []Goal {
	var gs []Goal
	for _, many := range r.Steady {
		single := r.SteadyAt(many.Shoots, 1)
		if many.Replicas < 3 || single == nil || len(many.RSSBytes) == 0 || len(single.RSSBytes) == 0 {
			continue
		}
		ratio := slices.Max(many.RSSBytes) / max(mean(single.RSSBytes), 1)
		gs = append(gs, Goal{
			Goal:     fmt.Sprintf("RSS of each of %d replicas over a single replica's, %d shoots", many.Replicas, many.Shoots),
			Target:   "≤ 0.45",
			Measured: fmt.Sprintf("%.2f (%.0f of %.0f MiB)", ratio, slices.Max(many.RSSBytes)/(1<<20), mean(single.RSSBytes)/(1<<20)),
			Met:      ratio <= 0.45,
		})
		if !r.Settings.ShardSelectors || r.Settings.CacheSharding != "server" || len(many.ChurnEventsReceived) == 0 || len(single.ChurnEventsReceived) == 0 {
			continue
		}
		received := slices.Max(many.ChurnEventsReceived) / max(mean(single.ChurnEventsReceived), 1)
		gs = append(gs, Goal{
			Goal:     fmt.Sprintf("seed watch events received by each of %d replicas over a single replica's, %d shoots", many.Replicas, many.Shoots),
			Target:   "≤ 0.40",
			Measured: fmt.Sprintf("%.2f (%.0f of %.0f)", received, slices.Max(many.ChurnEventsReceived), mean(single.ChurnEventsReceived)),
			Met:      received <= 0.40,
		})
	}
	return gs
}

// replicaCPUGoals bound the CPU of each of 3 or more replicas against a single replica's at the same
// number of shoots.
func replicaCPUGoals(r *Result) []Goal {
	var gs []Goal
	for _, many := range r.Steady {
		single := r.SteadyAt(many.Shoots, 1)
		if many.Replicas < 3 || single == nil {
			continue
		}
		ratio := slices.Max(many.CPUCores) / max(mean(single.CPUCores), 1e-9)
		gs = append(gs, Goal{
			Goal:     fmt.Sprintf("CPU of each of %d replicas over a single replica's, %d shoots", many.Replicas, many.Shoots),
			Target:   "≤ 0.40",
			Measured: fmt.Sprintf("%.2f (%.3f of %.3f cores)", ratio, slices.Max(many.CPUCores), mean(single.CPUCores)),
			Met:      ratio <= 0.40,
		})
	}
	return gs
}

// cpuPerHealthyProbe bounds a single replica's CPU per 1,000 healthy probes: the target, set
// on an outside harness (1,000 shoots of 5 nodes with 10 container images each, protobuf, 10 s).
const cpuPerHealthyProbe = 1.2

// cpuPerProbeGoals checks the CPU per 1,000 healthy probes of every steady run on one replica.
func cpuPerProbeGoals(steady []SteadyRun) []Goal {
	var gs []Goal
	for _, s := range steady {
		if s.Replicas != 1 || len(s.CPUSecondsPer1000HealthyProbes) != 1 {
			continue
		}
		cpu := s.CPUSecondsPer1000HealthyProbes[0]
		gs = append(gs, Goal{
			Goal:     fmt.Sprintf("CPU per 1,000 healthy probes, %d shoots, 1 replica", s.Shoots),
			Target:   fmt.Sprintf("≤ %g CPU-s", cpuPerHealthyProbe),
			Measured: fmt.Sprintf("%.3f CPU-s (%.0f probes, %.0f not healthy)", cpu, s.Probes, s.UnhealthyProbes),
			Met:      cpu <= cpuPerHealthyProbe,
		})
	}
	return gs
}

// blipGoals checks that after a blip no write contradicts the shoots' latest probes, no shoot is left
// at 0, and the shoots are restored in time.
func blipGoals(x Blip) []Goal {
	scenario := fmt.Sprintf("blip, %s profile, %d of %d shoots for %.0f s, %d replicas", x.Profile.Name, x.Melted, x.SeedShoots, x.OutageSeconds, x.Replicas)
	interval := x.Profile.ProbeIntervalSeconds
	target := kubeletRenewInterval.Seconds() + interval + x.Profile.MCMScaleUpDelaySeconds + x.RestoreFloorSeconds + restoreFlowSlack
	return []Goal{{
		Goal:   scenario + ": scale-down writes later than the shoot's kubelets renewed again + a probe interval + 5 s",
		Target: "0",
		Measured: fmt.Sprintf("%d on %d shoots (last %.1f s after the renewal); %d scale-down writes after the recovery in all, %d of them later than the limit after the recovery itself (the last kubelets renewed %.1f s after it)",
			x.LateScaleDownWrites, x.LateScaleDownShoots, x.LateScaleDownMaxSeconds, x.ScaleDownWritesAfterRecovery, x.LateFromRecoveryWrites, x.RenewedAgainMaxSeconds),
		Met: x.LateScaleDownWrites == 0,
	}, {
		Goal:   scenario + ": shoots with a dependent at 0, 3 probe intervals after the recovery",
		Target: "0",
		Measured: fmt.Sprintf("%d; %d scale writes until then, of a scale budget of %.0f%s", x.ShootsAtZero,
			x.WritesBeforeAtZero, x.WriteBudgetBeforeAtZero, tokensAtRecovery(x.BudgetTokensAtRecovery)),
		Met: x.ShootsAtZero == 0,
	}, {
		Goal: scenario + ": restored after the recovery",
		Target: fmt.Sprintf("p99 ≤ kubelet renewal + probe interval + MCM delay + write floor + %g s = %.1f s",
			restoreFlowSlack, target),
		Measured: fmt.Sprintf("p99 %.1f s (p50 %.1f, max %.1f) of %d shoots, %d not restored; %d of %d found during the outage",
			x.RestoredP99Seconds, x.RestoredP50Seconds, x.RestoredMaxSeconds, x.Restoring, x.NotRestored, x.ScaledDownDuringOutage, x.Melted),
		Met: x.RestoredP99Seconds <= target && x.NotRestored == 0,
	}}
}

// kcmAfterMCMLimit bounds the time from the level 0 writes (machine-controller-manager and
// cluster-autoscaler) to kube-controller-manager's: the original waits at most 5 s for a level's pods
// before the next level; a second more for the write and the watch that sees it.
const kcmAfterMCMLimit = 6.0

// detectionGoals checks every case with a figure of the original against it, and the wait before
// kube-controller-manager over all cases.
func detectionGoals(d Detection) []Goal {
	scenario := fmt.Sprintf("detection, %s profile (interval %g s)", d.Profile.Name, d.Profile.ProbeIntervalSeconds)
	var gs []Goal
	var kcm []float64
	notWritten := 0
	for _, c := range d.Cases {
		kcm = append(kcm, c.KCMAfterMCMSeconds...)
		notWritten += c.KCMNotWritten
		if c.Original == "" {
			continue
		}
		gs = append(gs, Goal{
			Goal:   fmt.Sprintf("%s, %s: T0 to the first scale-down write", scenario, c.Case),
			Target: fmt.Sprintf("p99 ≤ the original's (%s) %.1f s", c.Original, c.OriginalP99Seconds),
			Measured: fmt.Sprintf("p99 %.1f s, p50 %.1f s (original %.1f), %d of %d not within %.0f s",
				c.P99Seconds, c.P50Seconds, c.OriginalP50Seconds, c.NotScaledDown, c.Samples, c.TimeoutSeconds),
			Met: c.P99Seconds <= c.OriginalP99Seconds && c.NotScaledDown == 0,
		})
	}
	if len(d.Cases) == 0 {
		return gs
	}
	p99 := sampleQuantile(0.99, kcm)
	return append(gs, Goal{
		Goal:     scenario + ": kube-controller-manager written after machine-controller-manager and cluster-autoscaler",
		Target:   fmt.Sprintf("p99 ≤ the original's level wait (5 s) + 1 s = %g s, every one written", kcmAfterMCMLimit),
		Measured: fmt.Sprintf("p99 %.2f s, p50 %.2f s of %d shoots, %d not written", p99, sampleQuantile(0.5, kcm), len(kcm), notWritten),
		Met:      len(kcm) > 0 && p99 <= kcmAfterMCMLimit && notWritten == 0,
	})
}

// rollingGoals checks that a rolling restart hands no shoot over and leaves none unprobed for long.
func rollingGoals(x *Rolling, interval float64) []Goal {
	scenario := fmt.Sprintf("rolling restart of %d replicas at %d shoots", x.Replicas, x.Shoots)
	return []Goal{{
		Goal: scenario + ": shoots handed to another replica", Target: "0",
		Measured: strconv.Itoa(x.HandedOver), Met: x.HandedOver == 0,
	}, {
		Goal: scenario + ": longest probe gap", Target: fmt.Sprintf("≤ 1.5 × probe interval = %g s", 1.5*interval),
		Measured: fmt.Sprintf("%.2f s (p99 %.2f s), %d shoots over %g s, %d not probed by their owner's new process",
			x.LongestGapSeconds, x.GapP99Seconds, x.GapsOverLimit, x.GapLimitSeconds, x.NotResumed),
		Met: x.LongestGapSeconds <= 1.5*interval,
	}}
}

// outageGoals checks that a seed API outage moves no partition, and opens and scales nothing.
func outageGoals(x *Outage) []Goal {
	scenario := fmt.Sprintf("seed API outage of %.0f s, %d replicas at %d shoots", x.OutageSeconds, x.Replicas, x.Shoots)
	windows := 0.0
	for _, n := range x.WeederWindowsOpened {
		windows += n
	}
	return []Goal{{
		Goal: scenario + ": partitions whose holder changed", Target: "0",
		Measured: fmt.Sprintf("%d (%d held by another member meanwhile; %d shoots probed by another replica)",
			x.PartitionsMoved, x.PartitionsHeldByOthers, x.ProbedByOthers),
		Met: x.PartitionsMoved == 0,
	}, {
		Goal: scenario + ": weeder windows opened after the heal", Target: "0 (no service changes readiness)",
		Measured: fmt.Sprintf("%.0f (%.0f open at the cut)", windows, x.WeederWindowsOpenAtCut), Met: windows == 0,
	}, {
		Goal: scenario + ": scale writes", Target: "none, while cut or after the heal",
		Measured: fmt.Sprintf("%d while cut, %d after the heal", x.ScaleWritesCut, x.ScaleWritesHealed),
		Met:      x.ScaleWritesCut == 0 && x.ScaleWritesHealed == 0,
	}}
}

// The shoot requests of a healthy probe: the node leases from the watch cache every time, the nodes
// from the watch cache every tenth time (a probe keeps them for ten intervals while its leases are
// fresh), no GET /version; a consistent read only before a scale-down. The window's edges cut probes
// in two, so a hundredth is allowed.
const (
	shootRequestsPerHealthyProbe = 1.1
	requestsPerProbeTolerance    = 0.01
)

// shootRequestsGoal checks the shoot requests per healthy probe at every steady load.
func shootRequestsGoal(steady []SteadyRun) Goal {
	worst := slices.MaxFunc(steady, func(a, b SteadyRun) int {
		return cmp.Compare(a.ShootRequestsPerProbe, b.ShootRequestsPerProbe)
	})
	consistent := slices.MaxFunc(steady, func(a, b SteadyRun) int {
		return cmp.Compare(a.ConsistentLeaseListsPerProbe, b.ConsistentLeaseListsPerProbe)
	}).ConsistentLeaseListsPerProbe
	return Goal{
		Goal:   "shoot requests per healthy probe",
		Target: fmt.Sprintf("%.1f (leases, nodes every tenth probe, from the watch cache), no consistent read", shootRequestsPerHealthyProbe),
		Measured: fmt.Sprintf("%.3f at worst (%d shoots, %d replicas); %.4f consistent lease lists per probe at worst",
			worst.ShootRequestsPerProbe, worst.Shoots, worst.Replicas, consistent),
		Met: worst.ShootRequestsPerProbe <= shootRequestsPerHealthyProbe+requestsPerProbeTolerance && consistent <= requestsPerProbeTolerance/10,
	}
}

// The mass-meltdown goals.
const (
	// originalLimitsScaleDownP99 bounds the scale-downs of a few dozen shoots with the original's
	// client limits.
	originalLimitsScaleDownP99 = 20.0
	// restoreFlowSlack is the time a scale-up flow takes beyond its writes: three levels, each
	// waiting for its Deployments to be ready, which the simulated seed reports at once.
	restoreFlowSlack = 5.0
	// allScaleDownOverFloor bounds the time until every shoot is scaled down, over the write floor.
	allScaleDownOverFloor = 1.2
)

// massGoals checks the mass-meltdown parts that ran.
func massGoals(m *MassMeltdown, interval float64) []Goal {
	var gs []Goal
	if x := m.OriginalLimits; x != nil {
		gs = append(gs, Goal{
			Goal:   fmt.Sprintf("%d shoots melt at once, 1 replica, original client limits (%s)", x.Melted, x.Client),
			Target: fmt.Sprintf("scaled down p99 ≤ %g s", originalLimitsScaleDownP99),
			Measured: fmt.Sprintf("p99 %.1f s (p50 %.1f, max %.1f), %d not within %.0f s", x.ScaledDownP99Seconds, x.ScaledDownP50Seconds,
				x.ScaledDownMaxSeconds, x.NotScaledDown, x.ScaleDownTimeoutSeconds),
			Met: x.ScaledDownP99Seconds <= originalLimitsScaleDownP99 && x.NotScaledDown == 0,
		})
	}
	for _, x := range m.Recover {
		target := kubeletRenewInterval.Seconds() + interval + x.MCMScaleUpDelaySeconds + x.RestoreFloorSeconds + restoreFlowSlack
		gs = append(gs, Goal{
			Goal:     fmt.Sprintf("%d of %d shoots melt and recover, %d replicas: restored", x.Melted, x.SeedShoots, x.Replicas),
			Target:   fmt.Sprintf("p99 ≤ kubelet renewal + probe interval + MCM delay + write floor + %g s = %.1f s", restoreFlowSlack, target),
			Measured: fmt.Sprintf("p99 %.1f s, %d not restored (scaled down p99 %.1f s)", x.RestoredP99Seconds, x.NotRestored, x.ScaledDownP99Seconds),
			Met:      x.RestoredP99Seconds <= target && x.NotRestored == 0 && x.NotScaledDown == 0,
		}, Goal{
			Goal:     fmt.Sprintf("%d of %d shoots melt and recover, %d replicas: probe lag meanwhile", x.Melted, x.SeedShoots, x.Replicas),
			Target:   "p99 < 1 s, 0 missed cycles",
			Measured: fmt.Sprintf("p99 %.3f s, %.0f missed", x.ProbeLagP99Seconds, x.MissedCycles),
			Met:      x.ProbeLagP99Seconds < 1 && x.MissedCycles == 0,
		})
	}
	// With a floor of 0 (the bursts cover every write) the time is all detection: no goal to check.
	if x := m.All; x != nil && x.ScaleDownFloorSeconds > 0 {
		gs = append(gs, Goal{
			Goal:   fmt.Sprintf("all %d shoots melt at once, %d replicas: all scaled down", x.Melted, x.Replicas),
			Target: fmt.Sprintf("≤ %g × write floor = %.1f s", allScaleDownOverFloor, allScaleDownOverFloor*x.ScaleDownFloorSeconds),
			Measured: fmt.Sprintf("%.1f s (p50 %.1f s), %d not within %.0f s; seed requests per scaled resource %.2f (scaler %.2f)",
				x.ScaledDownMaxSeconds, x.ScaledDownP50Seconds, x.NotScaledDown, x.ScaleDownTimeoutSeconds, x.SeedRequestsPerScaledResource,
				x.ScalerRequestsPerScaledResource),
			Met: x.NotScaledDown == 0 && x.ScaledDownMaxSeconds <= allScaleDownOverFloor*x.ScaleDownFloorSeconds,
		})
	}
	return gs
}

// hugeListPeakRSS bounds a replica's memory while shoots answer huge lists.
const hugeListPeakRSS = 512 << 20

// liesGoals checks that no lie scaled anything down, and the memory of the huge lists.
func liesGoals(l *Lies) []Goal {
	var spurious []string
	total := 0
	for _, p := range l.Parts {
		spurious = append(spurious, fmt.Sprintf("%s: %d", p.Lie, p.SpuriousScaleDowns))
		total += p.SpuriousScaleDowns
	}
	gs := []Goal{{
		Goal: fmt.Sprintf("lies at %d shoots, %d replicas: spurious scale-downs", l.Shoots, l.Replicas), Target: "0",
		Measured: strings.Join(spurious, "; "), Met: total == 0,
	}}
	for _, p := range l.Parts {
		if p.ExtraLeases == 0 || len(p.PeakRSSBytes) == 0 {
			continue
		}
		peak := slices.Max(p.PeakRSSBytes)
		gs = append(gs, Goal{
			Goal: fmt.Sprintf("replica memory while %d shoots answer %s", p.Shoots, p.Lie), Target: "peak RSS < 512 MiB",
			Measured: fmt.Sprintf("%.0f MiB", peak/(1<<20)), Met: peak < hugeListPeakRSS,
		})
	}
	return gs
}

// tokensAtRecovery says what the replicas' scale budgets held at the recovery, by replica in name
// order; empty when that is not known.
func tokensAtRecovery(tokens map[string]float64) string {
	if tokens == nil {
		return ""
	}
	parts := make([]string, 0, len(tokens))
	for _, name := range slices.Sorted(maps.Keys(tokens)) {
		parts = append(parts, fmt.Sprintf("%.0f", tokens[name]))
	}
	return " (the rate, and the tokens the budgets held at the recovery: " + strings.Join(parts, ", ") + ")"
}
