package benchmarks

import (
	"context"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// restartStages are the rolling and outage scenarios that run, both at the largest load.
func (b *bench) restartStages(shoots, replicas int) []stage {
	var stages []stage
	if b.opts.runs(scenarioRolling) {
		stages = append(stages, stage{shoots, func(ctx context.Context) error {
			x, err := b.rolling(ctx, shoots, replicas)
			b.result.Rolling = x
			return wrap(scenarioRolling, err)
		}})
	}
	if b.opts.runs(scenarioOutage) {
		stages = append(stages, stage{shoots, func(ctx context.Context) error {
			x, err := b.outage(ctx, shoots, replicas)
			b.result.Outage = x
			return wrap(scenarioOutage, err)
		}})
	}
	return stages
}

// ownersOf is the replica that probes each shoot now, by the shoot server's last caller.
func ownersOf(callers map[string]sim.Caller) map[string]string {
	owners := make(map[string]string, len(callers))
	for shoot, c := range callers {
		owners[shoot] = memberOf(c.Agent)
	}
	return owners
}

// probedByOthers counts the shoots that a replica other than their owner probed in the window.
func probedByOthers(stats map[string]sim.ProbeStats, owners map[string]string) int {
	n := 0
	for shoot, st := range stats {
		for _, p := range st.Probers {
			if memberOf(p.Agent) != owners[shoot] {
				n++
				break
			}
		}
	}
	return n
}

// gapSummary is what the shoots' probe windows say of their gaps.
type gapSummary struct {
	// gaps are the seconds of each shoot's longest gap as of the window's end.
	gaps []float64
	// overLimit counts the shoots whose longest gap is above the limit.
	overLimit int
	// longestBy is the longest gap among the shoots of each owner, shootsBy how many it had.
	longestBy map[string]float64
	shootsBy  map[string]int
}

// summarizeGaps collects the shoots' longest probe gaps as of now, by their owners.
func summarizeGaps(stats map[string]sim.ProbeStats, owners map[string]string, now time.Time, limit time.Duration) gapSummary {
	s := gapSummary{longestBy: map[string]float64{}, shootsBy: map[string]int{}}
	for shoot, st := range stats {
		gap := st.Gap(now)
		s.gaps = append(s.gaps, gap.Seconds())
		if gap > limit {
			s.overLimit++
		}
		owner := owners[shoot]
		s.longestBy[owner] = max(s.longestBy[owner], gap.Seconds())
		s.shootsBy[owner]++
	}
	return s
}

// notResumed counts the shoots that their owner has not probed since it started last: a new process
// of a member sends the same User-Agent as the old one, so only the time tells them apart. A shoot
// whose owner did not restart counts once probed in the window.
func notResumed(stats map[string]sim.ProbeStats, owners map[string]string, started map[string]time.Time) int {
	n := 0
	for shoot, owner := range owners {
		if !probedByOwnerSince(stats[shoot], owner, started[owner]) {
			n++
		}
	}
	return n
}

// probedByOwnerSince reports whether owner probed the shoot in the window after since.
func probedByOwnerSince(st sim.ProbeStats, owner string, since time.Time) bool {
	for _, p := range st.Probers {
		if memberOf(p.Agent) == owner && p.Last.After(since) {
			return true
		}
	}
	return false
}

// firstByOwner is, per shoot its owner probed in the window, the moment of its first probe then.
func firstByOwner(stats map[string]sim.ProbeStats, owners map[string]string) map[string]time.Time {
	first := map[string]time.Time{}
	for shoot, owner := range owners {
		for _, p := range stats[shoot].Probers {
			if memberOf(p.Agent) == owner {
				first[shoot] = p.First
			}
		}
	}
	return first
}

// counterIncrease is a counter's increase of one replica between two snapshots; a process that
// restarted in between starts again from 0, so its later value is all increase.
func counterIncrease(a, b snapshot, replica, name, match string) float64 {
	before, after := sim.Sum(a.metrics[replica], name, match), sim.Sum(b.metrics[replica], name, match)
	if after < before {
		return after
	}
	return after - before
}

// gapLimit is the longest probe gap a restart may cause: 1.5 probe intervals.
func gapLimit(interval time.Duration) time.Duration { return interval * 3 / 2 }

// restartResumeTimeout bounds the wait for every shoot to be probed by its owner again: a member
// lease, the return grace, two probe intervals and a minute.
func restartResumeTimeout(interval time.Duration) time.Duration {
	return benchLeaseDuration + benchReturnGrace + 2*interval + time.Minute
}
