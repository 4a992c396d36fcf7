package benchmarks

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Options say what a run plays and where it writes (dwd-sim bench's flags, named in the messages of
// Validate). The fields of a scenario matter only when it runs.
type Options struct {
	// Name names the result files, <Out>/<Name>.json, .md and .png; Baseline is a result to compare
	// with in the Markdown table, skipped when missing.
	Name, Out, Baseline string
	// Dwd is the dwd binary (FindDwd when empty); Dir receives the configs and the replica logs (a new
	// temporary folder when empty).
	Dwd, Dir string
	// Scenarios are the scenarios to play, of Scenarios.
	Scenarios []string
	// Shoots and Replicas are the loads of the steady scenario; the other scenarios run at the largest.
	Shoots, Replicas []int
	// Nodes per shoot, and the container images each Node lists in its status.
	Nodes, NodeImages int
	// Repeats is how often each handover event is played; Meltdowns how many meltdowns, of
	// MeltdownShoots shoots each.
	Repeats, Meltdowns, MeltdownShoots int
	// ProbeWorkers is each replica's --probe-workers (0: no bound but the shoots).
	ProbeWorkers int
	// Duration is how long each steady run is measured; Interval is the prober's probeInterval.
	Duration, Interval time.Duration
	// Outage is how long the outage scenario cuts every replica from the seed's API server.
	Outage time.Duration
	// Pprof gives every replica a pprof endpoint; its address is in <Dir>/<replica>.pprof.
	Pprof bool
	// CacheSharding is every replica's --cache-sharding; "" leaves dwd's default.
	CacheSharding string
	// WithoutShardSelectors runs the seed's kube-apiserver with the feature gate ShardedListAndWatch
	// off: shard selectors are ignored.
	WithoutShardSelectors bool
	// Mass and Lies size the fault scenarios.
	Mass MassOptions
	Lies LiesOptions
	// Profile is the prober settings the blip and detection scenarios run at: ProfileDefault,
	// ProfileGardener or ProfileBoth.
	Profile string
	// Blip and Detection size the verdict scenarios.
	Blip      BlipOptions
	Detection DetectionOptions
}

// MassOptions size the mass-meltdown scenario's parts.
type MassOptions struct {
	OriginalShoots int   // (original) shoots melted on one replica with the original's client limits
	Seed, Melt     int   // (recover) shoots on the seed, and melted
	Replicas       []int // (recover) the replica counts it runs on
}

// LiesOptions size the lies scenario.
type LiesOptions struct {
	Shoots, Replicas       int
	HugeLeases, HugeShoots int           // the extra Leases in the lease lists of HugeShoots shoots
	Duration               time.Duration // how long each lie is told; 0: 3 probe intervals
	CacheLag, SlowBody     time.Duration // how old a stale cache's leases get; how late a slow body comes
	NodeClock, ServerClock time.Duration // the kubelets' and the shoot API servers' clock offsets
}

// The scenarios, and the parts the mass-meltdown scenario stands for.
const (
	scenarioSteady       = "steady"
	scenarioHandover     = "handover"
	scenarioMeltdown     = "meltdown"
	scenarioMassMeltdown = "mass-meltdown"
	scenarioMassOriginal = "mass-meltdown-original"
	scenarioMassRecover  = "mass-meltdown-recover"
	scenarioMassAll      = "mass-meltdown-all"
	scenarioLies         = "lies"
	scenarioRolling      = "rolling"
	scenarioOutage       = "outage"
	scenarioBlip         = "blip"
	scenarioDetection    = "detection"
	scenarioRoles        = "roles"
)

// Scenarios are the scenarios a run can play.
var Scenarios = []string{scenarioSteady, scenarioHandover, scenarioMeltdown, scenarioMassMeltdown, scenarioMassOriginal,
	scenarioMassRecover, scenarioMassAll, scenarioLies, scenarioRolling, scenarioOutage, scenarioBlip, scenarioDetection, scenarioRoles}

// DefaultScenarios are the scenarios a run plays unless told otherwise.
func DefaultScenarios() []string { return []string{scenarioSteady, scenarioHandover, scenarioMeltdown} }

// Validate checks the options before anything starts; Run does too.
func (o *Options) Validate() error {
	var errs []error
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) {
			errs = append(errs, fmt.Errorf("--scenarios: unknown scenario %q (%s)", s, strings.Join(Scenarios, ", ")))
		}
	}
	if len(o.Shoots) == 0 || slices.Min(o.Shoots) < 1 {
		return errors.Join(append(errs, errors.New("--shoots: give at least one positive number"))...)
	}
	if len(o.Replicas) == 0 || slices.Min(o.Replicas) < 1 {
		return errors.Join(append(errs, errors.New("--replicas: give at least one positive number"))...)
	}
	largest := slices.Max(o.Shoots)
	if o.runs(scenarioHandover) && slices.Max(o.Replicas) < 2 {
		errs = append(errs, errors.New("--replicas: the handover scenario needs at least 2"))
	}
	if o.runs(scenarioMeltdown) && o.MeltdownShoots > largest {
		errs = append(errs, errors.New("--meltdown-shoots: more than there are shoots"))
	}
	if o.runs(scenarioOutage) && o.Outage <= 0 {
		errs = append(errs, errors.New("--outage-duration must be positive"))
	}
	if o.Interval <= 0 || o.Duration <= 0 || o.Repeats < 1 || o.Meltdowns < 1 || o.MeltdownShoots < 1 || o.Nodes < 1 || o.NodeImages < 0 || o.ProbeWorkers < 0 {
		errs = append(errs, errors.New("--probe-interval, --duration, --repeats, --meltdowns, --meltdown-shoots and --nodes must be positive, --node-images and --probe-workers not negative"))
	}
	errs = append(errs, o.Mass.validate(o, largest), o.Lies.validate(o, largest), o.validateVerdicts(largest))
	if o.Name == "" || strings.ContainsAny(o.Name, `/\`) {
		errs = append(errs, fmt.Errorf("--name %q: give a file name without a folder", o.Name))
	}
	return errors.Join(errs...)
}

// validate checks the mass-meltdown flags of the parts that run.
func (m MassOptions) validate(o *Options, largest int) error {
	var errs []error
	if o.runs(scenarioMassOriginal) && (m.OriginalShoots < 1 || m.OriginalShoots > largest) {
		errs = append(errs, fmt.Errorf("--mass-meltdown-original-shoots: give 1 to the largest --shoots (%d)", largest))
	}
	if o.runs(scenarioMassRecover) {
		if m.Seed < 1 || m.Seed > largest || m.Melt < 1 || m.Melt > m.Seed {
			errs = append(errs, fmt.Errorf("--mass-meltdown-seed, --mass-meltdown-melt: give 1 ≤ melt ≤ seed ≤ the largest --shoots (%d)", largest))
		}
		if len(m.Replicas) == 0 || slices.Min(m.Replicas) < 1 {
			errs = append(errs, errors.New("--mass-meltdown-replicas: give at least one positive number"))
		}
	}
	return errors.Join(errs...)
}

// validate checks the lies flags when the scenario runs.
func (l LiesOptions) validate(o *Options, largest int) error {
	if !o.runs(scenarioLies) {
		return nil
	}
	var errs []error
	if l.Shoots < 1 || l.Shoots > largest || l.Replicas < 1 {
		errs = append(errs, fmt.Errorf("--lies-shoots, --lies-replicas: give 1 to the largest --shoots (%d) shoots and a positive replica count", largest))
	}
	if l.HugeShoots < 1 || l.HugeShoots > l.Shoots || l.HugeLeases < 1 {
		errs = append(errs, errors.New("--huge-shoots, --huge-leases: give positive numbers, at most --lies-shoots huge shoots"))
	}
	if l.Duration < 0 || l.CacheLag < 0 || l.SlowBody < 0 {
		errs = append(errs, errors.New("--lie-duration, --lie-cache-lag and --lie-slow-body must not be negative"))
	}
	return errors.Join(errs...)
}

// runs reports whether a scenario runs: named, or a part of one named.
func (o *Options) runs(scenario string) bool {
	if slices.Contains(o.Scenarios, scenario) {
		return true
	}
	part := scenario == scenarioMassOriginal || scenario == scenarioMassRecover || scenario == scenarioMassAll
	return part && slices.Contains(o.Scenarios, scenarioMassMeltdown)
}
