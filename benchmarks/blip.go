package benchmarks

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// BlipOptions size the blip scenario.
type BlipOptions struct {
	Seed, Melt int   // the shoots on the seed, and those whose kubelets stop renewing
	Replicas   []int // the replica counts it runs on
	// Outage is how long the kubelets stop renewing; 0 for blipOutage's.
	Outage time.Duration
}

// The blip scenario's windows, after the recovery: a scale-down write later than a probe interval and
// blipLateSlack is one the latest probe contradicts; a shoot still at 0 blipAtZeroIntervals probe
// intervals after it is stuck; and writes are watched for at least blipWatchIntervals probe intervals
// (no less than blipMinWatch), and until every melted shoot is restored.
const (
	blipLateSlack       = 5 * time.Second
	blipAtZeroIntervals = 3
	blipWatchIntervals  = 6
	blipMinWatch        = 2 * time.Minute
)

// kubeletRenewInterval is how often the simulated kubelets renew (sim.ShootServerOptions' default):
// one resumes within that after a recovery.
const kubeletRenewInterval = 10 * time.Second

// blipOutage is long enough for the prober to find the melted shoots: the leases expire 0.75 × grace
// after the last renewal, the next probe comes within an interval, and 10 s more: 50 s at a 10 s
// interval, 70 s at 30 s.
func blipOutage(interval time.Duration) time.Duration {
	return time.Duration(expiryOfGrace*float64(benchGrace)) + interval + 10*time.Second
}

// blipStages are the blip runs, one per profile and replica count.
func (b *bench) blipStages() []stage {
	if !b.opts.runs(scenarioBlip) {
		return nil
	}
	var stages []stage
	for _, p := range timings(b.opts.Profile) {
		for _, r := range b.opts.Blip.Replicas {
			stages = append(stages, stage{b.opts.Blip.Seed, func(ctx context.Context) error {
				x, err := b.blip(ctx, p, r)
				if x != nil {
					b.result.Blips = append(b.result.Blips, *x)
				}
				return wrap(fmt.Sprintf("%s, %s profile, %d replicas", scenarioBlip, b.profile(p).Name, r), err)
			}})
		}
	}
	return stages
}

// blip melts part of the seed for the outage, lets it recover, and watches what the replicas write
// afterwards.
func (b *bench) blip(ctx context.Context, p replicaProfile, replicas int) (*Blip, error) {
	o := b.opts.Blip
	interval := p.probeInterval(b.opts.Interval)
	rs, err := b.replicaSet(p)
	if err != nil {
		return nil, err
	}
	if err := b.startFresh(ctx, o.Seed, replicas, rs); err != nil {
		return nil, err
	}
	defer b.stopAll()
	names := spread(o.Melt, b.shoots)
	x := &Blip{Profile: b.profile(p), SeedShoots: b.shoots, Melted: len(names), Replicas: replicas,
		OutageSeconds: o.outageAt(interval).Seconds(), LateLimitSeconds: (interval + blipLateSlack).Seconds(),
		AtZeroAfterSeconds: (blipAtZeroIntervals * interval).Seconds(), RestoreTimeoutSeconds: b.blipRestoreTimeout(p, replicas).Seconds(),
		RestoreFloorSeconds: b.blipFloor(p, replicas)}
	fmt.Fprintf(b.out, "blip, %s: %d of %d shoots lose their kubelets for %s on %d replicas; warming up %s\n",
		x.Profile, x.Melted, x.SeedShoots, o.outageAt(interval), replicas, steadyWarmUp*interval)
	if err := pause(ctx, steadyWarmUp*interval); err != nil {
		return x, err
	}
	s0 := b.snapshot(ctx)
	recovery, err := b.blipOutage(ctx, names, o.outageAt(interval), x)
	if err != nil {
		return x, err
	}
	if err := b.blipAftermath(ctx, names, recovery, interval, x); err != nil {
		return x, err
	}
	s1 := b.snapshot(ctx)
	x.ProbeLagP99Seconds = histogramQuantile(0.99, histogramDelta(s0, s1, "dwd_probe_lag_seconds"))
	for _, r := range b.replicas {
		x.MissedCycles += delta(s0, s1, r.Name, "dwd_probe_missed_cycles_total", "")
	}
	fmt.Fprintf(b.out, "  %d found during the outage; %d scale-down writes after the recovery, %d later than %.0fs (%d shoots, last %.1fs); %d at 0 after %.0fs; restored p50 %.1fs p99 %.1fs max %.1fs, %d not\n",
		x.ScaledDownDuringOutage, x.ScaleDownWritesAfterRecovery, x.LateScaleDownWrites, x.LateLimitSeconds, x.LateScaleDownShoots,
		x.LateScaleDownMaxSeconds, x.ShootsAtZero, x.AtZeroAfterSeconds, x.RestoredP50Seconds, x.RestoredP99Seconds, x.RestoredMaxSeconds, x.NotRestored)
	return x, b.awaitAllUp(ctx, names, time.Minute)
}

// outageAt is the outage at a probe interval: the flag's, or blipOutage's.
func (o BlipOptions) outageAt(interval time.Duration) time.Duration {
	if o.Outage > 0 {
		return o.Outage
	}
	return blipOutage(interval)
}

// blipFloor is the write floor of restoring every melted shoot on the replicas.
func (b *bench) blipFloor(p replicaProfile, replicas int) float64 {
	qps, burst := scaleBudget(p.limits(b.dwdHas), b.dwdHas)
	return writeFloor(scaleWritesPerShoot*b.opts.Blip.Melt, replicas, qps, burst)
}

// blipRestoreTimeout bounds the wait for the melted shoots to be restored after the recovery: a
// kubelet renewal, a probe interval, machine-controller-manager's delay, twice the write floor of
// restoring them all and two minutes.
func (b *bench) blipRestoreTimeout(p replicaProfile, replicas int) time.Duration {
	return kubeletRenewInterval + p.probeInterval(b.opts.Interval) + p.mcmScaleUpDelay + 2*seconds(b.blipFloor(p, replicas)) + 2*time.Minute
}

// blipOutage stops the kubelets of the shoots for the outage and lets them renew again; it returns the
// moment of the recovery, taken before the first shoot renews.
func (b *bench) blipOutage(ctx context.Context, names []string, outage time.Duration, x *Blip) (time.Time, error) {
	b.scaling.mark()
	if err := b.setScenario(names, sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 1}); err != nil {
		return time.Time{}, err
	}
	if err := pause(ctx, outage); err != nil {
		return time.Time{}, err
	}
	recovery := time.Now()
	if err := b.setScenario(names, sim.Scenario{}); err != nil {
		return recovery, err
	}
	x.BudgetTokensAtRecovery = b.budgetTokens(ctx)
	_, _, below := b.scaling.moments()
	for _, ns := range names {
		if at, ok := below[ns]; ok && at.Before(recovery) {
			x.ScaledDownDuringOutage++
		}
	}
	return recovery, nil
}

// blipAftermath counts the shoots at 0 three intervals after the recovery, then watches until the
// watch window has passed and every melted shoot is restored (or the restore timeout), and measures
// the late writes and the restores.
func (b *bench) blipAftermath(ctx context.Context, names []string, recovery time.Time, interval time.Duration, x *Blip) error {
	writes := b.scaling.writes()
	if err := pause(ctx, time.Until(recovery.Add(seconds(x.AtZeroAfterSeconds)))); err != nil {
		return err
	}
	x.ShootsAtZero = b.scaling.atZero(names)
	x.WritesBeforeAtZero = b.scaling.writes() - writes
	qps, burst := scaleBudget(x.Profile.Client, b.dwdHas)
	x.WriteBudgetBeforeAtZero = writeBudget(x.Replicas, qps, burst, x.AtZeroAfterSeconds, x.BudgetTokensAtRecovery)
	watch := max(blipWatchIntervals*interval, blipMinWatch)
	if err := pause(ctx, time.Until(recovery.Add(watch))); err != nil {
		return err
	}
	timeout := time.Until(recovery.Add(seconds(x.RestoreTimeoutSeconds)))
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, max(timeout, time.Second), true, func(context.Context) (bool, error) {
		return b.scaling.allUp(names), nil
	})
	if err != nil && ctx.Err() != nil {
		return err
	}
	x.WatchedSeconds = time.Since(recovery).Seconds()
	decreases, restored := b.scaling.since()
	renewed, last := b.renewedAgain(names)
	x.RenewedAgainMaxSeconds = max(last.Sub(recovery).Seconds(), 0)
	late := lateScaleDowns(decreases, recovery, renewed, seconds(x.LateLimitSeconds))
	x.ScaleDownWritesAfterRecovery, x.LateScaleDownWrites, x.LateScaleDownShoots = late.afterRecovery, late.writes, late.shoots
	x.LateScaleDownMaxSeconds, x.LateFromRecoveryWrites = late.lastSeconds, late.fromRecovery
	restores := restoreTimes(decreases, restored, b.scaling.allUp, recovery, seconds(x.RestoreTimeoutSeconds))
	x.Restoring, x.NotRestored = len(restores.done)+restores.missing, restores.missing
	x.RestoredP50Seconds, x.RestoredP99Seconds, x.RestoredMaxSeconds = restores.quantiles()
	return nil
}

// budgetTokens scrapes dwd_scale_budget_tokens from every replica, by name, leaving out a replica
// that does not export it (a dwd before it) or could not be scraped; nil when none could.
func (b *bench) budgetTokens(ctx context.Context) map[string]float64 {
	tokens := map[string]float64{}
	for _, r := range b.replicas {
		if m := r.Metrics(ctx, budgetTokensMetric); m[budgetTokensMetric] != nil {
			tokens[r.Name] = sim.Sum(m, budgetTokensMetric, "")
		}
	}
	if len(tokens) == 0 {
		return nil
	}
	return tokens
}

const budgetTokensMetric = "dwd_scale_budget_tokens"

// writeBudget is how many scale writes replicas budgets of qps and burst allow in seconds after the
// recovery: the refill, and what each held at the recovery (tokens, each counted between 0 and the
// burst; the whole burst for a replica not in tokens). A scale-down reserved ahead that the recovery
// ends gives its token back, so a bucket in debt counts as empty, not as less.
func writeBudget(replicas int, qps float64, burst int, seconds float64, tokens map[string]float64) float64 {
	held := float64(max(replicas-len(tokens), 0) * burst)
	for _, t := range tokens {
		held += min(max(t, 0), float64(burst))
	}
	return float64(replicas)*qps*seconds + held
}

// awaitAllUp waits until every shoot named is at its replicas, so that the next stage starts from a
// healthy seed.
func (b *bench) awaitAllUp(ctx context.Context, names []string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return b.scaling.allUp(names), nil
	})
	if err != nil {
		return fmt.Errorf("not every melted shoot is back at its replicas %s later: %w", timeout, err)
	}
	return nil
}

// lateWrites are the scale-down writes after a recovery.
type lateWrites struct {
	// afterRecovery counts those after it; writes those later than the limit after the shoot's kubelets
	// renewed again, on shoots, the last lastSeconds after that (0 without one); and fromRecovery those
	// later than the limit after the recovery itself, whenever the shoot's kubelets renewed.
	afterRecovery, writes, shoots, fromRecovery int
	lastSeconds                                 float64
}

// lateScaleDowns counts the writes that lowered a dependent's replicas after the recovery, and those
// later than limit after the shoot's kubelets renewed again (renewed; the recovery for a shoot not in
// it): no probe can find a shoot healthy before, and a resumed kubelet renews within its renew
// interval.
func lateScaleDowns(decreases []scaleWrite, recovery time.Time, renewed map[string]time.Time, limit time.Duration) lateWrites {
	var l lateWrites
	shoots := map[string]bool{}
	for _, w := range decreases {
		if !w.at.After(recovery) {
			continue
		}
		l.afterRecovery++
		if w.at.Sub(recovery) > limit {
			l.fromRecovery++
		}
		from := recovery
		if at, ok := renewed[w.shoot]; ok && at.After(recovery) {
			from = at
		}
		if after := w.at.Sub(from); after > limit {
			l.writes++
			shoots[w.shoot] = true
			l.lastSeconds = max(l.lastSeconds, after.Seconds())
		}
	}
	l.shoots = len(shoots)
	return l
}

// renewedAgain returns, per shoot named whose kubelets resumed at the recovery, when its leases
// stopped proving the meltdown (sim.ShootServer.RenewedAgain), and the latest of those moments.
func (b *bench) renewedAgain(names []string) (map[string]time.Time, time.Time) {
	renewed := make(map[string]time.Time, len(names))
	var last time.Time
	for _, ns := range names {
		if at, ok := b.seed.Shoots.RenewedAgain(ns, sim.ExpiredFraction); ok {
			renewed[ns] = at
			if at.After(last) {
				last = at
			}
		}
	}
	return renewed, last
}

// restoreTimes are, for each shoot with a scale-down write since the mark, the seconds from the
// recovery until it was last restored (0 when that was before it); a shoot not at its replicas now
// (up says which) is missing and counts as the timeout.
func restoreTimes(decreases []scaleWrite, restored map[string]time.Time, up func([]string) bool, recovery time.Time, timeout time.Duration) samples {
	s := samples{timeout: timeout.Seconds()}
	seen := map[string]bool{}
	for _, w := range decreases {
		if seen[w.shoot] {
			continue
		}
		seen[w.shoot] = true
		at, ok := restored[w.shoot]
		if !ok || !up([]string{w.shoot}) {
			s.missing++
			continue
		}
		s.done = append(s.done, max(at.Sub(recovery).Seconds(), 0))
	}
	return s
}
