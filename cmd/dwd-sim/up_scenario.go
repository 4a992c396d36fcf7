package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// scenarioFlags set the scenario `dwd-sim up` plays on its shoots.
type scenarioFlags struct {
	kind                               string
	shoots                             int
	expiredFraction                    float64
	delay, retryAfter, cacheLag        time.Duration
	nodeClockOffset, serverClockOffset time.Duration
	extraLeases, extraNodes            int
}

func (f *scenarioFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.kind, "scenario", "Healthy", "How the shoots' API servers behave: Healthy, Meltdown, Down, Slow, Throttled, StaleCache or SlowBody.")
	fs.IntVar(&f.shoots, "scenario-shoots", 0, "How many shoots play the scenario, the first ones (0: all).")
	fs.Float64Var(&f.expiredFraction, "expired-fraction", 0, "Meltdown: the fraction of node leases expired.")
	fs.DurationVar(&f.delay, "delay", 0, "Slow, SlowBody: how long an answer (SlowBody: the lease list's body) is held back.")
	fs.DurationVar(&f.retryAfter, "retry-after", 0, "Throttled: the Retry-After of the answers, in whole seconds (0: 1s).")
	fs.DurationVar(&f.cacheLag, "cache-lag", 0, "StaleCache: how far the watch cache was behind when it stopped.")
	fs.DurationVar(&f.nodeClockOffset, "node-clock-offset", 0, "Added to every renewTime the kubelets write (-90s: node clocks 90 s behind).")
	fs.DurationVar(&f.serverClockOffset, "server-clock-offset", 0, "Added to the Date header of every answer.")
	fs.IntVar(&f.extraLeases, "extra-leases", 0, "Leases of no node in each lease list (a tenant filling kube-node-lease).")
	fs.IntVar(&f.extraNodes, "extra-nodes", 0, "Nodes without a Machine in each node list.")
}

// scenario is the scenario the flags describe; SetScenario validates it.
func (f *scenarioFlags) scenario() (sim.Scenario, error) {
	kind, err := sim.ParseScenarioKind(f.kind)
	if err != nil {
		return sim.Scenario{}, err
	}
	return sim.Scenario{
		Kind: kind, ExpiredFraction: f.expiredFraction, Delay: f.delay, RetryAfter: f.retryAfter, CacheLag: f.cacheLag,
		NodeClockOffset: f.nodeClockOffset, ServerClockOffset: f.serverClockOffset, ExtraLeases: f.extraLeases, ExtraNodes: f.extraNodes,
	}, nil
}

// apply sets the scenario on the first --scenario-shoots of the shoots (all when 0).
func (f *scenarioFlags) apply(shoots *sim.ShootServer, total int) error {
	sc, err := f.scenario()
	if err != nil {
		return err
	}
	n := total
	if f.shoots > 0 {
		n = min(f.shoots, total)
	}
	for i := range n {
		if err := shoots.SetScenario(sim.ShootName(i), sc); err != nil {
			return err
		}
	}
	return nil
}
