package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// DetectionOptions size the detection scenario.
type DetectionOptions struct {
	Seed, Replicas, Shoots, Rounds int      // the shoots on the seed, the replicas, the shoots melted per round, the rounds per case
	Cases                          []string // of DetectionCases
}

// What happens to the replica that owns a round's shoots.
const (
	eventNone  = ""
	eventKill  = "kill"  // SIGKILL at T0
	eventLeave = "leave" // SIGTERM (a graceful handover) at T0 + detectionLeaveAfter
)

// detectionLeaveAfter is when the graceful handover case stops the owner, after T0.
const detectionLeaveAfter = 10 * time.Second

// The original's cases its figures are computed for (docs/benchmarks.md, "The verdict scenarios").
const (
	originalSteady = "steady"
	originalKilled = "leader killed at T0"
)

// detectionCase is one case of the detection scenario.
type detectionCase struct {
	key, name string
	// before is the shoots' scenario from the start of the round's warm-up; melt the one set at T0.
	before, melt sim.Scenario
	event        string
	// original is the case of the original the figures are set against.
	original string
}

// serverClockOffset is the shoot API servers' Date header offset of the server-clock case.
const serverClockOffset = 30 * time.Second

var meltAll = sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 1}

// detectionCases are the cases, in the order they run. The original reads no Date header, so its
// figure for an API server clock that is off is its steady one; a graceful leader change costs it the
// same initialDelay as a killed leader, which is the only one the table has.
var detectionCases = []detectionCase{
	{key: "steady", name: "steady", melt: meltAll, original: originalSteady},
	{key: "owner-killed", name: "owner killed (-9) at T0", melt: meltAll, event: eventKill, original: originalKilled},
	{key: "handover", name: "graceful handover at T0+10 s", melt: meltAll, event: eventLeave, original: originalKilled},
	{key: "server-clock", name: "shoot Date header +30 s", before: sim.Scenario{ServerClockOffset: serverClockOffset},
		melt: sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 1, ServerClockOffset: serverClockOffset}, original: originalSteady},
	{key: "melt70-killed", name: "70 % melt, owner killed (-9) at T0", melt: sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 0.7},
		event: eventKill, original: originalKilled},
}

// DetectionCases are the keys of the cases the detection scenario can play (Options.Detection.Cases).
func DetectionCases() []string {
	keys := make([]string, len(detectionCases))
	for i, c := range detectionCases {
		keys[i] = c.key
	}
	return keys
}

// originalDetection is the original's seconds from T0 to its first ScaleDown decision, p50 and p99,
// by case and probe interval, computed from its rule (by age only, over 400 seeds; a leader change
// costs a 15 s lease, a 2 s retry and its 30 s initialDelay).
var originalDetection = map[string]map[time.Duration][2]float64{
	originalSteady: {10 * time.Second: {31.3, 38.9}, 30 * time.Second: {41.5, 58.8}},
	originalKilled: {10 * time.Second: {47.0, 47.0}, 30 * time.Second: {47.0, 47.0}},
}

// originalFigures are the original's p50 and p99 for a case at an interval; false when the table has
// none.
func originalFigures(original string, interval time.Duration) (p50, p99 float64, ok bool) {
	f, ok := originalDetection[original][interval]
	return f[0], f[1], ok
}

// detectionStages are the detection runs, one per profile.
func (b *bench) detectionStages() []stage {
	if !b.opts.runs(scenarioDetection) {
		return nil
	}
	var stages []stage
	for _, p := range timings(b.opts.Profile) {
		stages = append(stages, stage{b.opts.Detection.Seed, func(ctx context.Context) error {
			d := &Detection{Profile: b.profile(p), Replicas: b.opts.Detection.Replicas, Rounds: b.opts.Detection.Rounds,
				ShootsPerRound: b.opts.Detection.Shoots}
			b.result.Detection = append(b.result.Detection, *d)
			err := b.detection(ctx, p, &b.result.Detection[len(b.result.Detection)-1])
			return wrap(fmt.Sprintf("%s, %s profile", scenarioDetection, d.Profile.Name), err)
		}})
	}
	return stages
}

// detection plays the chosen cases at one profile, each on freshly started replicas.
func (b *bench) detection(ctx context.Context, p replicaProfile, d *Detection) error {
	o := b.opts.Detection
	rs, err := b.replicaSet(p)
	if err != nil {
		return err
	}
	defer b.stopAll()
	for _, c := range detectionCases {
		if !slices.Contains(o.Cases, c.key) {
			continue
		}
		if err := b.startFresh(ctx, o.Seed, o.Replicas, rs); err != nil {
			return err
		}
		d.SeedShoots = b.shoots
		x, err := b.detectionCase(ctx, c, p.probeInterval(b.opts.Interval))
		d.Cases = append(d.Cases, x)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

// detectionTimeout bounds the wait for a round's shoots to be scaled down after T0: a member lease
// (the owner's successor), the grace, three probe intervals and a minute.
func detectionTimeout(interval time.Duration) time.Duration {
	return benchLeaseDuration + benchGrace + 3*interval + time.Minute
}

// detectionCase plays the rounds of one case and measures them.
func (b *bench) detectionCase(ctx context.Context, c detectionCase, interval time.Duration) (DetectionCase, error) {
	o := b.opts.Detection
	x := DetectionCase{Case: c.name, TimeoutSeconds: detectionTimeout(interval).Seconds()}
	if p50, p99, ok := originalFigures(c.original, interval); ok {
		x.Original, x.OriginalP50Seconds, x.OriginalP99Seconds = c.original, p50, p99
	}
	fromT0, fromRenewal := samples{timeout: x.TimeoutSeconds}, samples{timeout: x.TimeoutSeconds}
	used := map[string]bool{}
	for round := range o.Rounds {
		victim := b.replicas[round%len(b.replicas)]
		names, err := b.ownedBy(victim.Name, o.Shoots, used)
		if err != nil {
			return x, err
		}
		r, err := b.detectionRound(ctx, c, names, victim, interval)
		if err != nil {
			return x, fmt.Errorf("round %d: %w", round+1, err)
		}
		fromT0.add(r.fromT0)
		fromRenewal.add(r.fromRenewal)
		x.KCMAfterMCMSeconds = append(x.KCMAfterMCMSeconds, r.kcmAfterMCM...)
		x.KCMNotWritten += r.kcmNotWritten
		fmt.Fprintf(b.out, "  %s, round %d (%s owns the shoots): first scale-down %s s after T0, %d not within %.0fs\n",
			c.name, round+1, victim.Name, strings.Join(rounded(r.fromT0.done), " "), r.fromT0.missing, x.TimeoutSeconds)
	}
	x.Samples, x.NotScaledDown, x.Seconds = len(fromT0.done)+fromT0.missing, fromT0.missing, fromT0.done
	x.P50Seconds, x.P99Seconds, _ = fromT0.quantiles()
	x.FromLastRenewalP50Seconds, x.FromLastRenewalP99Seconds, _ = fromRenewal.quantiles()
	x.KCMAfterMCMP50Seconds, x.KCMAfterMCMP99Seconds = sampleQuantile(0.5, x.KCMAfterMCMSeconds), sampleQuantile(0.99, x.KCMAfterMCMSeconds)
	return x, nil
}

// roundResult is what one round measured.
type roundResult struct {
	fromT0, fromRenewal samples
	kcmAfterMCM         []float64
	kcmNotWritten       int
}

// detectionRound warms the replicas up on the shoots, melts them at T0 with the case's event on their
// owner, waits until they are scaled down, recovers them and brings the owner back.
func (b *bench) detectionRound(ctx context.Context, c detectionCase, names []string, victim *sim.Replica, interval time.Duration) (roundResult, error) {
	var r roundResult
	if err := b.setScenario(names, c.before); err != nil {
		return r, err
	}
	if err := pause(ctx, steadyWarmUp*interval); err != nil {
		return r, err
	}
	b.scaling.mark()
	if err := b.setScenario(names, c.melt); err != nil {
		return r, err
	}
	melts := map[string]sim.Melt{}
	for _, ns := range names {
		melts[ns], _ = b.seed.Shoots.Melted(ns)
	}
	if err := b.detectionEvent(ctx, c.event, victim); err != nil {
		return r, err
	}
	timeout := detectionTimeout(interval)
	if err := b.until(ctx, "scaled down", names, timeout, func() map[string]time.Time { down, _, _ := b.scaling.moments(); return down }); err != nil {
		return r, err
	}
	_, _, below := b.scaling.moments()
	r.fromT0 = since(func(ns string) time.Time { return melts[ns].Stopped }, names, below, timeout)
	r.fromRenewal = since(func(ns string) time.Time { return melts[ns].LastRenewal }, names, below, timeout)
	decreases, _ := b.scaling.since()
	r.kcmAfterMCM, r.kcmNotWritten = kcmAfterMCM(decreases)
	return r, b.recoverRound(ctx, names, victim)
}

// detectionEvent does the case's event to the owner of the round's shoots, right after T0.
func (b *bench) detectionEvent(ctx context.Context, event string, victim *sim.Replica) error {
	switch event {
	case eventKill:
		victim.Kill()
		b.forget(victim)
	case eventLeave:
		if err := pause(ctx, detectionLeaveAfter); err != nil {
			return err
		}
		victim.Terminate(30 * time.Second)
		b.forget(victim)
	}
	return nil
}

// recoverRound lets the round's kubelets renew again, waits until the shoots are restored and starts
// the owner again if the round stopped it.
func (b *bench) recoverRound(ctx context.Context, names []string, victim *sim.Replica) error {
	if err := b.setScenario(names, sim.Scenario{}); err != nil {
		return err
	}
	if err := b.awaitAllUp(ctx, names, 3*time.Minute+gardenerMCMScaleUpDelay); err != nil {
		return err
	}
	if victim.Running() {
		return nil
	}
	before := b.seed.Shoots.Callers()
	start := time.Now()
	if err := b.rejoin(victim); err != nil {
		return err
	}
	_, _, err := b.settle(ctx, start, before, benchLeaseDuration+time.Minute)
	return err
}

// ownedBy names n shoots of the seed that the ring of the running replicas gives to owner, in the
// seed's order, skipping those used already (which it adds them to).
func (b *bench) ownedBy(owner string, n int, used map[string]bool) ([]string, error) {
	members := make([]string, len(b.replicas))
	for i, r := range b.replicas {
		members[i] = r.Name
	}
	own, err := newOwnership(members)
	if err != nil {
		return nil, err
	}
	var names []string
	for i := 0; i < b.shoots && len(names) < n; i++ {
		if ns := sim.ShootName(i); !used[ns] && own.owner(ns) == owner {
			names = append(names, ns)
			used[ns] = true
		}
	}
	if len(names) < n {
		return nil, fmt.Errorf("%s owns only %d unused shoots of %d, %d wanted: give a larger --detection-seed or fewer --detection-shoots × --detection-rounds",
			owner, len(names), b.shoots, n)
	}
	return names, nil
}

// The dependents of the scale-down levels: level 0 before level 1.
const (
	dependentKCM = "kube-controller-manager"
	dependentMCM = "machine-controller-manager"
	dependentCA  = "cluster-autoscaler"
)

// kcmAfterMCM is, per shoot whose three dependents were all lowered, the seconds from the later of the
// first machine-controller-manager and cluster-autoscaler writes (level 0) to the first
// kube-controller-manager write (level 1), in the order of the shoots' first writes; and how many
// shoots had both level 0 writes but no kube-controller-manager write.
func kcmAfterMCM(decreases []scaleWrite) (gaps []float64, notWritten int) {
	first := map[string]map[string]time.Time{}
	var order []string
	for _, w := range decreases {
		if first[w.shoot] == nil {
			first[w.shoot] = map[string]time.Time{}
			order = append(order, w.shoot)
		}
		if _, seen := first[w.shoot][w.dependent]; !seen {
			first[w.shoot][w.dependent] = w.at
		}
	}
	for _, ns := range order {
		kcm, okK := first[ns][dependentKCM]
		mcm, okM := first[ns][dependentMCM]
		ca, okC := first[ns][dependentCA]
		switch {
		case okK && okM && okC:
			gaps = append(gaps, kcm.Sub(later(mcm, ca)).Seconds())
		case okM && okC:
			notWritten++
		}
	}
	return gaps, notWritten
}

// later is the later of two moments.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// add adds another set of samples' measured and missing ones.
func (s *samples) add(o samples) {
	s.done = append(s.done, o.done...)
	s.missing += o.missing
}

// validateVerdicts checks --profile and the flags of the blip and detection scenarios that run.
func (o *Options) validateVerdicts(largest int) error {
	var errs []error
	if (o.runs(scenarioBlip) || o.runs(scenarioDetection)) && timings(o.Profile) == nil {
		errs = append(errs, fmt.Errorf("--profile %q: give %s, %s or %s", o.Profile, ProfileDefault, ProfileGardener, ProfileBoth))
	}
	if b := o.Blip; o.runs(scenarioBlip) {
		if b.Seed < 1 || b.Seed > largest || b.Melt < 1 || b.Melt > b.Seed {
			errs = append(errs, fmt.Errorf("--blip-seed, --blip-melt: give 1 ≤ melt ≤ seed ≤ the largest --shoots (%d)", largest))
		}
		if len(b.Replicas) == 0 || slices.Min(b.Replicas) < 1 || b.Outage < 0 {
			errs = append(errs, errors.New("--blip-replicas: give at least one positive number; --blip-outage must not be negative"))
		}
	}
	if d := o.Detection; o.runs(scenarioDetection) {
		if d.Seed < 1 || d.Seed > largest || d.Replicas < 2 || d.Shoots < 1 || d.Rounds < 1 {
			errs = append(errs, fmt.Errorf("--detection-seed (1 to the largest --shoots, %d), --detection-replicas (at least 2), --detection-shoots, --detection-rounds: out of range", largest))
		}
		for _, c := range d.Cases {
			if !slices.Contains(DetectionCases(), c) {
				errs = append(errs, fmt.Errorf("--detection-cases: unknown case %q (%s)", c, strings.Join(DetectionCases(), ", ")))
			}
		}
	}
	return errors.Join(errs...)
}
