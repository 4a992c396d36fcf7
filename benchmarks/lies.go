package benchmarks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// liesProbeTimeout is the lies scenario's probeTimeout: the original's default, which Gardener keeps.
const liesProbeTimeout = 30 * time.Second

// liesProfile is Gardener's client limits and prober config, with the scale budget and the shoot
// answer bounds at their defaults.
var liesProfile = replicaProfile{name: "lies", kubeAPIQPS: benchKubeAPIQPS, kubeAPIBurst: benchKubeAPIBurst,
	scaleBudget: true, responseBounds: true, probeTimeout: liesProbeTimeout, mcmScaleUpDelay: gardenerMCMScaleUpDelay}

// lie is one lie the shoots tell.
type lie struct {
	name     string
	scenario sim.Scenario
	// shoots is how many shoots tell it, spread over the seed; 0 for all.
	shoots int
	// hold is how long it is told.
	hold time.Duration
}

// lieList is the lies of the scenario, in the order they are told: every shoot lies in each, except
// that only a few have huge lease lists.
func lieList(o LiesOptions, interval time.Duration) []lie {
	hold := o.Duration
	if hold == 0 {
		hold = 3 * interval
	}
	return []lie{
		{name: "stale cache, leases " + o.CacheLag.String() + " old", scenario: sim.Scenario{Kind: sim.StaleCache, CacheLag: o.CacheLag}, hold: hold},
		{name: "lease list body " + o.SlowBody.String() + " late", scenario: sim.Scenario{Kind: sim.SlowBody, Delay: o.SlowBody}, hold: hold + o.SlowBody},
		{name: "node clocks " + signed(o.NodeClock), scenario: sim.Scenario{NodeClockOffset: o.NodeClock}, hold: hold},
		{name: "server clock " + signed(o.ServerClock), scenario: sim.Scenario{ServerClockOffset: o.ServerClock}, hold: hold},
		{name: strconv.Itoa(o.HugeLeases) + " extra leases", scenario: sim.Scenario{ExtraLeases: o.HugeLeases}, shoots: o.HugeShoots, hold: hold},
	}
}

// signed formats a duration with its sign.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// liesStages is the lies scenario, if it runs.
func (b *bench) liesStages() []stage {
	if !b.opts.runs(scenarioLies) {
		return nil
	}
	return []stage{{b.opts.Lies.Shoots, func(ctx context.Context) error {
		l, err := b.lies(ctx)
		b.result.Lies = l
		return wrap(scenarioLies, err)
	}}}
}

// lies starts the replicas and tells the lies one after the other.
func (b *bench) lies(ctx context.Context) (*Lies, error) {
	o := b.opts.Lies
	rs, err := b.replicaSet(liesProfile)
	if err != nil {
		return nil, err
	}
	if err := b.startFresh(ctx, o.Shoots, o.Replicas, rs); err != nil {
		return nil, err
	}
	defer b.stopAll()
	result := &Lies{Shoots: b.shoots, Replicas: o.Replicas, ProbeTimeoutSeconds: liesProbeTimeout.Seconds(),
		Client: liesProfile.limits(b.dwdHas)}
	fmt.Fprintf(b.out, "lies: %d shoots on %d replicas (%s), probe timeout %s\n", b.shoots, o.Replicas, result.Client, liesProbeTimeout)
	for _, l := range lieList(o, b.opts.Interval) {
		part, err := b.tell(ctx, l)
		if err != nil {
			return result, fmt.Errorf("%s: %w", l.name, err)
		}
		result.Parts = append(result.Parts, part)
	}
	return result, nil
}

// tell has the shoots tell a lie for its hold, then tell the truth for a settling time (a probe
// interval and a probe timeout, so that answers of the lie still in flight arrive), and counts the
// shoots scaled down meanwhile. If any were, it waits until they are restored.
func (b *bench) tell(ctx context.Context, l lie) (LiePart, error) {
	n := b.shoots
	if l.shoots > 0 {
		n = min(l.shoots, b.shoots)
	}
	names := spread(n, b.shoots)
	part := LiePart{Lie: l.name, Shoots: len(names), ExtraLeases: l.scenario.ExtraLeases, HeldSeconds: l.hold.Seconds()}
	fmt.Fprintf(b.out, "  %s: %d shoots for %s\n", l.name, len(names), l.hold)
	s0 := b.snapshot(ctx)
	b.scaling.mark()
	peaks := sampleRSS(b.replicas, 200*time.Millisecond)
	err := b.setScenario(names, l.scenario)
	if err == nil {
		err = pause(ctx, l.hold)
	}
	if err == nil {
		err = b.setScenario(names, sim.Scenario{})
	}
	if err == nil {
		err = pause(ctx, b.opts.Interval+liesProbeTimeout)
	}
	part.PeakRSSBytes = peaks()
	if err != nil {
		return part, err
	}
	s1 := b.snapshot(ctx)
	_, _, below := b.scaling.moments()
	part.SpuriousScaleDowns = len(below)
	part.ProbesByResult = countersByLabel(s0, s1, "dwd_probes_total", "", "result")
	part.ConsistentLeaseLists = float64(s1.shoots.LeaseLists.Consistent - s0.shoots.LeaseLists.Consistent)
	part.CachedLeaseLists = float64(s1.shoots.LeaseLists.Cached - s0.shoots.LeaseLists.Cached)
	for _, r := range b.replicas {
		part.MissedCycles += delta(s0, s1, r.Name, "dwd_probe_missed_cycles_total", "")
	}
	fmt.Fprintf(b.out, "    %d spurious scale-downs, probes %v, lease lists %.0f consistent / %.0f cached, %.0f missed cycles, peak RSS %s MiB\n",
		part.SpuriousScaleDowns, part.ProbesByResult, part.ConsistentLeaseLists, part.CachedLeaseLists, part.MissedCycles, mib(part.PeakRSSBytes))
	if part.SpuriousScaleDowns > 0 {
		return part, b.awaitRestore(ctx, part.SpuriousScaleDowns)
	}
	return part, nil
}

// awaitRestore waits until every shoot of the seed is at its replicas again, after n spurious
// scale-downs.
func (b *bench) awaitRestore(ctx context.Context, n int) error {
	qps, burst := scaleBudget(liesProfile.limits(b.dwdHas), b.dwdHas)
	timeout := b.opts.Interval + gardenerMCMScaleUpDelay + 2*seconds(writeFloor(scaleWritesPerShoot*n, len(b.replicas), qps, burst)) + 2*time.Minute
	names := spread(b.shoots, b.shoots)
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		return b.scaling.allUp(names), nil
	})
	if err != nil {
		return fmt.Errorf("the %d shoots scaled down were not restored within %s: %w", n, timeout, err)
	}
	return nil
}

// sampleRSS samples the replicas' resident memory every period until the function it returns is
// called, which returns each replica's highest sample.
func sampleRSS(replicas []*sim.Replica, period time.Duration) func() []float64 {
	peaks := make([]float64, len(replicas))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ticker := time.NewTicker(period)
		defer ticker.Stop()
		for {
			for i, r := range replicas {
				if rss, err := r.Memory("VmRSS"); err == nil {
					peaks[i] = max(peaks[i], float64(rss))
				}
			}
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
		}
	})
	return func() []float64 {
		close(stop)
		wg.Wait()
		return peaks
	}
}

// mib formats bytes as MiB, comma-separated.
func mib(values []float64) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = fmt.Sprintf("%.0f", v/(1<<20))
	}
	return strings.Join(parts, ", ")
}
