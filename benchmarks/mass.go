package benchmarks

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// The profiles of the mass-meltdown parts.
var (
	// originalProfile is the original's client limits with the bench's prober config.
	originalProfile = replicaProfile{name: "original", kubeAPIQPS: originalKubeAPIQPS, kubeAPIBurst: originalKubeAPIBurst,
		probeTimeout: 5 * time.Second, mcmScaleUpDelay: 2 * time.Second}
	// gardenerProfile is Gardener's client limits, the scale budget at its defaults, and the bench's
	// prober config with Gardener's scale-up delay of machine-controller-manager.
	gardenerProfile = replicaProfile{name: "gardener", kubeAPIQPS: benchKubeAPIQPS, kubeAPIBurst: benchKubeAPIBurst,
		scaleBudget: true, responseBounds: true, probeTimeout: 5 * time.Second, mcmScaleUpDelay: gardenerMCMScaleUpDelay}
)

// scaleWritesPerShoot is what a shoot's scale-down (or scale-up) writes at least: one write per
// dependent.
var scaleWritesPerShoot = len(sim.Dependents)

// massStages are the mass-meltdown parts that run: the original's limits at its own size, the
// recovery at the seed it needs, on each replica count, and all shoots at the largest.
func (b *bench) massStages(shoots, replicas int) []stage {
	o := b.opts
	mass := func() *MassMeltdown {
		if b.result.MassMeltdown == nil {
			b.result.MassMeltdown = &MassMeltdown{}
		}
		return b.result.MassMeltdown
	}
	var stages []stage
	if o.runs(scenarioMassOriginal) {
		n := o.Mass.OriginalShoots
		stages = append(stages, stage{n, func(ctx context.Context) error {
			x, err := b.meltdownBatch(ctx, batchSpec{name: scenarioMassOriginal, shoots: n, melt: n, replicas: 1, profile: originalProfile})
			mass().OriginalLimits = x
			return wrap(scenarioMassOriginal, err)
		}})
	}
	if o.runs(scenarioMassRecover) {
		for _, r := range o.Mass.Replicas {
			stages = append(stages, stage{o.Mass.Seed, func(ctx context.Context) error {
				x, err := b.meltdownBatch(ctx, batchSpec{name: scenarioMassRecover, shoots: o.Mass.Seed, melt: o.Mass.Melt, replicas: r, profile: gardenerProfile})
				if x != nil {
					mass().Recover = append(mass().Recover, *x)
				}
				return wrap(scenarioMassRecover, err)
			}})
		}
	}
	if o.runs(scenarioMassAll) {
		stages = append(stages, stage{shoots, func(ctx context.Context) error {
			x, err := b.meltdownBatch(ctx, batchSpec{name: scenarioMassAll, shoots: shoots, melt: shoots, replicas: replicas, profile: gardenerProfile})
			mass().All = x
			return wrap(scenarioMassAll, err)
		}})
	}
	return stages
}

// batchSpec is one mass meltdown: melt of shoots on the seed, spread over it, on replicas started
// with the profile.
type batchSpec struct {
	name                   string
	shoots, melt, replicas int
	profile                replicaProfile
}

// meltdownBatch melts the shoots at once, waits until each is scaled down (or the time is up),
// renews their leases and waits until each is restored, and measures it.
func (b *bench) meltdownBatch(ctx context.Context, spec batchSpec) (*MeltdownBatch, error) {
	rs, err := b.replicaSet(spec.profile)
	if err != nil {
		return nil, err
	}
	if err := b.startFresh(ctx, spec.shoots, spec.replicas, rs); err != nil {
		return nil, err
	}
	defer b.stopAll()
	limits := spec.profile.limits(b.dwdHas)
	qps, burst := scaleBudget(limits, b.dwdHas)
	names := spread(spec.melt, b.shoots)
	floor := writeFloor(scaleWritesPerShoot*len(names), spec.replicas, qps, burst)
	x := &MeltdownBatch{SeedShoots: b.shoots, Melted: len(names), Replicas: spec.replicas, Client: limits,
		MCMScaleUpDelaySeconds: spec.profile.mcmScaleUpDelay.Seconds(), ScaleDownFloorSeconds: floor, RestoreFloorSeconds: floor,
		ScaleDownTimeoutSeconds: max(3*time.Minute, b.opts.Interval+2*seconds(floor)+time.Minute).Seconds()}
	x.RestoreTimeoutSeconds = (b.opts.Interval + spec.profile.mcmScaleUpDelay + 2*seconds(floor) + 2*time.Minute).Seconds()
	fmt.Fprintf(b.out, "%s: %d of %d shoots melt at once on %d replicas (%s); write floor %.1fs\n",
		spec.name, len(names), b.shoots, spec.replicas, limits, floor)

	s0 := b.snapshot(ctx)
	if err := b.scaleDown(ctx, names, x); err != nil {
		return x, err
	}
	s1 := b.snapshot(ctx)
	if err := b.restore(ctx, names, x); err != nil {
		return x, err
	}
	s2 := b.snapshot(ctx)
	x.ProbeLagP99Seconds = histogramQuantile(0.99, histogramDelta(s0, s2, "dwd_probe_lag_seconds"))
	for _, r := range b.replicas {
		x.MissedCycles += delta(s0, s2, r.Name, "dwd_probe_missed_cycles_total", "")
	}
	x.SeedRequestsByClient = countersByLabel(s0, s1, "dwd_api_requests_total", "api=seed", "client")
	scaled := float64(max(scaleWritesPerShoot*(x.Melted-x.NotScaledDown), 1))
	x.SeedRequestsPerScaledResource = (sumOf(x.SeedRequestsByClient) - x.SeedRequestsByClient["sharding"]) / scaled
	x.ScalerRequestsPerScaledResource = x.SeedRequestsByClient["scaler"] / scaled
	fmt.Fprintf(b.out, "  probe lag p99 %.3fs, %.0f missed cycles, seed requests per scaled resource %.2f (scaler %.2f) %v\n",
		x.ProbeLagP99Seconds, x.MissedCycles, x.SeedRequestsPerScaledResource, x.ScalerRequestsPerScaledResource, x.SeedRequestsByClient)
	return x, nil
}

// scaleDown melts the shoots and records when each was scaled down, from when its leases expired
// (the kubelets stop at the melt; the leases expire as they age).
func (b *bench) scaleDown(ctx context.Context, names []string, x *MeltdownBatch) error {
	b.scaling.mark()
	if err := b.setScenario(names, sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 1}); err != nil {
		return err
	}
	expired := map[string]time.Time{}
	for _, ns := range names {
		expired[ns] = b.seed.Shoots.ScaleDownDue(ns)
	}
	start := func(ns string) time.Time { return expired[ns] }
	timeout := seconds(x.ScaleDownTimeoutSeconds) + sim.ExpiredAge
	if err := b.until(ctx, "scaled down", names, timeout, func() map[string]time.Time { down, _, _ := b.scaling.moments(); return down }); err != nil {
		return err
	}
	down, _, _ := b.scaling.moments()
	samples := since(start, names, down, timeout)
	x.NotScaledDown = len(names) - len(samples.done)
	x.ScaledDownP50Seconds, x.ScaledDownP99Seconds, x.ScaledDownMaxSeconds = samples.quantiles()
	fmt.Fprintf(b.out, "  scaled down p50 %.1fs p99 %.1fs max %.1fs, %d not within %s\n",
		x.ScaledDownP50Seconds, x.ScaledDownP99Seconds, x.ScaledDownMaxSeconds, x.NotScaledDown, timeout)
	return nil
}

// restore renews the shoots' leases and records when each scaled-down shoot was restored; it waits
// for every shoot to be at its replicas.
func (b *bench) restore(ctx context.Context, names []string, x *MeltdownBatch) error {
	wasDown, _, _ := b.scaling.moments()
	start := b.scaling.mark()
	if err := b.setScenario(names, sim.Scenario{Kind: sim.Healthy}); err != nil {
		return err
	}
	var restoring []string
	for _, ns := range names {
		if _, ok := wasDown[ns]; ok {
			restoring = append(restoring, ns)
		}
	}
	timeout := seconds(x.RestoreTimeoutSeconds)
	err := b.until(ctx, "restored", restoring, timeout, func() map[string]time.Time { _, up, _ := b.scaling.moments(); return up })
	if err != nil {
		return err
	}
	_, up, _ := b.scaling.moments()
	samples := since(func(string) time.Time { return start }, restoring, up, timeout)
	x.NotRestored = len(restoring) - len(samples.done)
	x.RestoredP50Seconds, x.RestoredP99Seconds, x.RestoredMaxSeconds = samples.quantiles()
	fmt.Fprintf(b.out, "  restored p50 %.1fs p99 %.1fs max %.1fs, %d not within %s\n",
		x.RestoredP50Seconds, x.RestoredP99Seconds, x.RestoredMaxSeconds, x.NotRestored, timeout)
	// A shoot scaled down only in part was not waited for above.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return b.scaling.allUp(names), nil
	})
	if err != nil {
		return fmt.Errorf("not every melted shoot is back at its replicas a minute after the restore timeout (%s): %w", timeout, err)
	}
	return nil
}

// setScenario sets the scenario of the shoots.
func (b *bench) setScenario(names []string, sc sim.Scenario) error {
	for _, ns := range names {
		if err := b.seed.Shoots.SetScenario(ns, sc); err != nil {
			return err
		}
	}
	return nil
}

// until waits until moments holds every name, or the timeout passes (which is no error: the caller
// counts what is missing), and reports progress every 10 s.
func (b *bench) until(ctx context.Context, what string, names []string, timeout time.Duration, moments func() map[string]time.Time) error {
	count := func() int {
		m, n := moments(), 0
		for _, ns := range names {
			if _, ok := m[ns]; ok {
				n++
			}
		}
		return n
	}
	start, last := time.Now(), time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		n := count()
		if time.Since(last) >= 10*time.Second {
			fmt.Fprintf(b.out, "  %s: %d/%d after %s\n", what, n, len(names), time.Since(start).Round(time.Second))
			last = time.Now()
		}
		return n == len(names), nil
	})
	if err != nil && ctx.Err() == nil {
		return nil // the time is up
	}
	return err
}

// samples are the seconds from a start until each shoot's moment.
type samples struct {
	done    []float64
	timeout float64 // stands for the shoots without a moment
	missing int
}

// since collects the seconds from start to each name's moment.
func since(start func(ns string) time.Time, names []string, moments map[string]time.Time, timeout time.Duration) samples {
	s := samples{timeout: timeout.Seconds()}
	for _, ns := range names {
		if at, ok := moments[ns]; ok {
			s.done = append(s.done, at.Sub(start(ns)).Seconds())
		} else {
			s.missing++
		}
	}
	return s
}

// quantiles are p50, p99 and the maximum, a shoot without a moment counting as the timeout.
func (s samples) quantiles() (p50, p99, most float64) {
	all := append([]float64(nil), s.done...)
	for range s.missing {
		all = append(all, s.timeout)
	}
	if len(all) == 0 {
		return 0, 0, 0
	}
	return sampleQuantile(0.5, all), sampleQuantile(0.99, all), sampleQuantile(1, all)
}

// spread names n of the total shoots, evenly spaced; all of them when n is total.
func spread(n, total int) []string {
	names := make([]string, 0, n)
	for i := range n {
		names = append(names, sim.ShootName(i*total/n))
	}
	return names
}

// writeFloor is the least time, in seconds, that writes take when replicas share them evenly and
// each replica's token bucket allows qps after a burst: (writes − replicas × burst) / (replicas × qps),
// and 0 when the bursts cover them.
func writeFloor(writes, replicas int, qps float64, burst int) float64 {
	if replicas < 1 || qps <= 0 {
		return 0
	}
	return float64(max(writes-replicas*burst, 0)) / (float64(replicas) * qps)
}

// seconds turns seconds into a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
