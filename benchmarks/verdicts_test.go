package benchmarks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// secondsAfter is t0 plus s seconds.
func secondsAfter(t0 time.Time, s float64) time.Time {
	return t0.Add(time.Duration(s * float64(time.Second)))
}

func TestLateScaleDowns(t *testing.T) {
	recovery := time.Unix(1000, 0)
	at := func(s float64) time.Time { return secondsAfter(recovery, s) }
	decreases := []scaleWrite{
		{shoot: "a", dependent: dependentMCM, at: at(-20)}, // during the outage
		{shoot: "a", dependent: dependentKCM, at: at(0)},   // at the recovery: not after it
		{shoot: "b", dependent: dependentMCM, at: at(3)},   // after, within the limit
		{shoot: "b", dependent: dependentKCM, at: at(15)},  // the limit itself is not late
		{shoot: "c", dependent: dependentMCM, at: at(16)},
		{shoot: "c", dependent: dependentCA, at: at(40)},
		{shoot: "d", dependent: dependentKCM, at: at(65)},
	}
	got := lateScaleDowns(decreases, recovery, nil, 15*time.Second)
	assert.Equal(t, lateWrites{afterRecovery: 5, writes: 3, shoots: 2, fromRecovery: 3, lastSeconds: 65}, got)
	assert.Equal(t, lateWrites{}, lateScaleDowns(decreases[:2], recovery, nil, 15*time.Second), "nothing after the recovery")

	// c's kubelets renewed again 8 s after the recovery: its write at 16 s is not late, that at 40 s is.
	renewed := map[string]time.Time{"c": at(8), "d": at(-5)}
	got = lateScaleDowns(decreases, recovery, renewed, 15*time.Second)
	assert.Equal(t, lateWrites{afterRecovery: 5, writes: 2, shoots: 2, fromRecovery: 3, lastSeconds: 65}, got,
		"late from the later of the recovery and the shoot's renewal")
}

func TestRestoreTimes(t *testing.T) {
	recovery := time.Unix(1000, 0)
	at := func(s float64) time.Time { return secondsAfter(recovery, s) }
	decreases := []scaleWrite{
		{shoot: "a", dependent: dependentMCM, at: at(-20)}, {shoot: "a", dependent: dependentKCM, at: at(-15)},
		{shoot: "b", dependent: dependentMCM, at: at(-20)}, // restored before the recovery: 0
		{shoot: "c", dependent: dependentMCM, at: at(30)},  // late, restored again later
		{shoot: "d", dependent: dependentMCM, at: at(-10)}, // still down
		{shoot: "e", dependent: dependentMCM, at: at(-10)}, // restored once, down again now
	}
	restored := map[string]time.Time{"a": at(42), "b": at(-5), "c": at(90), "e": at(20), "untouched": at(1)}
	up := func(names []string) bool { return names[0] != "d" && names[0] != "e" }
	s := restoreTimes(decreases, restored, up, recovery, 3*time.Minute)
	assert.Equal(t, []float64{42, 0, 90}, s.done, "once per shoot with a scale-down, in the order of their first")
	assert.Equal(t, 2, s.missing)
	p50, p99, most := s.quantiles()
	assert.Equal(t, []float64{90, 180, 180}, []float64{p50, p99, most}, "the missing count as the timeout")
}

func TestKCMAfterMCM(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return secondsAfter(t0, s) }
	gaps, notWritten := kcmAfterMCM([]scaleWrite{
		{shoot: "a", dependent: dependentMCM, at: at(1)}, {shoot: "b", dependent: dependentCA, at: at(1.5)},
		{shoot: "a", dependent: dependentCA, at: at(2)}, {shoot: "a", dependent: dependentKCM, at: at(4.5)},
		{shoot: "a", dependent: dependentKCM, at: at(30)}, // a second write: the first counts
		{shoot: "b", dependent: dependentMCM, at: at(1)}, {shoot: "b", dependent: dependentKCM, at: at(9)},
		{shoot: "c", dependent: dependentMCM, at: at(1)}, {shoot: "c", dependent: dependentCA, at: at(1)}, // KCM never written
		{shoot: "d", dependent: dependentMCM, at: at(1)}, // level 0 unfinished: neither
	})
	assert.Equal(t, []float64{2.5, 7.5}, gaps, "from the later level 0 write")
	assert.Equal(t, 1, notWritten)
}

func TestScaleEventsRecordDecreasesAndRestores(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	e := newScaleEvents()
	for name, want := range sim.Dependents {
		e.observe("a", name, want, at(0))
	}
	e.mark()
	e.observe("a", dependentMCM, 0, at(1))
	e.observe("a", dependentMCM, 0, at(2)) // no change
	e.observe("a", dependentMCM, 1, at(3)) // back: restored
	e.observe("a", dependentKCM, 0, at(4))
	e.observe("a", dependentKCM, 1, at(5)) // back again: the last restore counts
	assert.Equal(t, []scaleWrite{{shoot: "a", dependent: dependentMCM, at: at(1)}, {shoot: "a", dependent: dependentKCM, at: at(4)}}, e.decreases)
	assert.Equal(t, map[string]time.Time{"a": at(5)}, e.restored)
	e.mark()
	assert.Empty(t, e.decreases)
	assert.Empty(t, e.restored)
}

func TestBlipOutageIsLongEnoughToBeFound(t *testing.T) {
	assert.Equal(t, 50*time.Second, blipOutage(10*time.Second), "the issue's 50 s at 10 s")
	assert.Equal(t, 70*time.Second, blipOutage(30*time.Second))
	assert.Equal(t, 70*time.Second, BlipOptions{}.outageAt(30*time.Second))
	assert.Equal(t, time.Minute, BlipOptions{Outage: time.Minute}.outageAt(30*time.Second), "the flag's")
}

func TestEveryDetectionCaseHasTheOriginalsFigures(t *testing.T) {
	for _, c := range detectionCases {
		for _, interval := range []time.Duration{10 * time.Second, 30 * time.Second} {
			_, p99, ok := originalFigures(c.original, interval)
			assert.True(t, ok && p99 > 0, "%s at %s", c.key, interval)
		}
		require.NoError(t, c.melt.Validate(), c.key)
		assert.Equal(t, sim.Meltdown, c.melt.Kind, c.key)
		assert.Equal(t, c.before.ServerClockOffset, c.melt.ServerClockOffset, "%s: the clock is off before and during the melt alike", c.key)
	}
	p50, p99, ok := originalFigures(originalSteady, 30*time.Second)
	assert.Equal(t, []float64{41.5, 58.8}, []float64{p50, p99})
	assert.True(t, ok)
	_, _, ok = originalFigures(originalSteady, 20*time.Second)
	assert.False(t, ok, "the original's figures are for 10 s and 30 s only")
	assert.Equal(t, []string{"steady", "owner-killed", "handover", "server-clock", "melt70-killed"}, DetectionCases())
}

func TestProfiles(t *testing.T) {
	assert.Equal(t, []replicaProfile{benchProfile, gardenerTimings}, timings(ProfileBoth), "the bench's first")
	assert.Equal(t, []replicaProfile{gardenerTimings}, timings(ProfileGardener))
	assert.Equal(t, []replicaProfile{benchProfile}, timings(ProfileDefault))
	assert.Nil(t, timings("fast"))

	assert.Equal(t, 10*time.Second, benchProfile.probeInterval(10*time.Second), "the bench's follows --probe-interval")
	assert.Equal(t, 30*time.Second, gardenerTimings.probeInterval(10*time.Second))
	cfg := benchProberConfig(gardenerTimings.probeInterval(10*time.Second), gardenerTimings.probeTimeout, gardenerTimings.mcmScaleUpDelay)
	for _, line := range []string{"probeInterval: 30s", "probeTimeout: 30s", "kcmNodeMonitorGraceDuration: 40s", "scaleUp: {level: 1, initialDelay: 30s}"} {
		assert.Contains(t, cfg, line)
	}
	all := map[string]bool{flagScaleWorkers: true, flagScaleQPS: true, flagScaleBurst: true}
	assert.Equal(t, ClientLimits{KubeAPIQPS: 20, KubeAPIBurst: 100, ScaleWorkers: 16, ScaleQPS: 20, ScaleBurst: 100},
		gardenerTimings.limits(all), "Gardener's --kube-api-qps=20 --kube-api-burst=100")

	b := &bench{opts: Options{Interval: 10 * time.Second}, dwdHas: all}
	assert.Equal(t, Profile{Name: ProfileGardener, ProbeIntervalSeconds: 30, GraceSeconds: 40, ProbeTimeoutSeconds: 30,
		MCMScaleUpDelaySeconds: 30, Client: gardenerTimings.limits(all)}, b.profile(gardenerTimings))
	assert.Equal(t, ProfileDefault, b.profile(benchProfile).Name)
}

func TestOwnedByNamesUnusedShootsOfTheOwner(t *testing.T) {
	b := &bench{shoots: 300, replicas: []*sim.Replica{{Name: "dwd-0"}, {Name: "dwd-1"}, {Name: "dwd-2"}}}
	own, err := newOwnership([]string{"dwd-0", "dwd-1", "dwd-2"})
	require.NoError(t, err)
	used := map[string]bool{}
	first, err := b.ownedBy("dwd-1", 20, used)
	require.NoError(t, err)
	second, err := b.ownedBy("dwd-1", 20, used)
	require.NoError(t, err)
	require.Len(t, first, 20)
	for _, ns := range append(first, second...) {
		assert.Equal(t, "dwd-1", own.owner(ns))
	}
	assert.NotContains(t, second, first[0], "a round takes shoots no round before took")
	assert.Len(t, used, 40)
	_, err = b.ownedBy("dwd-1", 300, used)
	assert.ErrorContains(t, err, "--detection-seed")
}

func TestVerdictGoals(t *testing.T) {
	gardener := Profile{Name: ProfileGardener, ProbeIntervalSeconds: 30, MCMScaleUpDelaySeconds: 30}
	r := &Result{
		Steady: []SteadyRun{
			{Shoots: 1000, Replicas: 1, CPUCores: []float64{0.1}, CPUSecondsPer1000HealthyProbes: []float64{1.19}},
			{Shoots: 5000, Replicas: 1, CPUCores: []float64{0.5}, CPUSecondsPer1000HealthyProbes: []float64{1.3}},
			{Shoots: 5000, Replicas: 3, CPUCores: []float64{0.1, 0.1, 0.1}, CPUSecondsPer1000HealthyProbes: []float64{1, 1, 1}},
		},
		Blips: []Blip{
			{Profile: gardener, SeedShoots: 1000, Melted: 600, Replicas: 1, OutageSeconds: 70, RestoreFloorSeconds: 85, RestoredP99Seconds: 160},
			{Profile: gardener, SeedShoots: 1000, Melted: 600, Replicas: 3, OutageSeconds: 70, LateScaleDownWrites: 1, ShootsAtZero: 2,
				RestoredP99Seconds: 76, NotRestored: 1},
		},
		Detection: []Detection{{Profile: gardener, Cases: []DetectionCase{
			{Case: "steady", Original: originalSteady, OriginalP99Seconds: 58.8, P99Seconds: 58.8, KCMAfterMCMSeconds: []float64{1, 5.9}},
			{Case: "owner killed", Original: originalKilled, OriginalP99Seconds: 47, P99Seconds: 46, NotScaledDown: 1},
			{Case: "new", KCMAfterMCMSeconds: []float64{2}},
		}}},
	}
	met := map[string]bool{}
	for _, g := range goals(r) {
		met[g.Goal] = g.Met
	}
	blip1, blip3 := "blip, gardener profile, 600 of 1000 shoots for 70 s, 1 replicas", "blip, gardener profile, 600 of 1000 shoots for 70 s, 3 replicas"
	detection := "detection, gardener profile (interval 30 s)"
	assert.Equal(t, map[string]bool{
		"CPU per 1,000 healthy probes, 1000 shoots, 1 replica":                                                  true,
		"CPU per 1,000 healthy probes, 5000 shoots, 1 replica":                                                  false,
		"CPU of each of 3 replicas over a single replica's, 5000 shoots":                                        true, // 0.1 / 0.5
		blip1 + ": scale-down writes later than the shoot's kubelets renewed again + a probe interval + 5 s":    true,
		blip1 + ": shoots with a dependent at 0, 3 probe intervals after the recovery":                          true,
		blip1 + ": restored after the recovery":                                                                 true, // 10 + 30 + 30 + 85 + 5 = 160
		blip3 + ": scale-down writes later than the shoot's kubelets renewed again + a probe interval + 5 s":    false,
		blip3 + ": shoots with a dependent at 0, 3 probe intervals after the recovery":                          false,
		blip3 + ": restored after the recovery":                                                                 false, // ≤ 75, and one not restored
		detection + ", steady: T0 to the first scale-down write":                                                true,
		detection + ", owner killed: T0 to the first scale-down write":                                          false, // a shoot not scaled down
		detection + ": kube-controller-manager written after machine-controller-manager and cluster-autoscaler": true,
	}, dropSteadyGoals(met), "a case without the original's figures has no goal of its own")

	r.Detection[0].Cases[2].KCMNotWritten = 1
	met = map[string]bool{}
	for _, g := range goals(r) {
		met[g.Goal] = g.Met
	}
	assert.False(t, met[detection+": kube-controller-manager written after machine-controller-manager and cluster-autoscaler"], "a shoot left with KCM up")
	r.Detection[0].Cases = []DetectionCase{{Case: "steady", KCMAfterMCMSeconds: []float64{6.1}}}
	for _, g := range goals(r) {
		if g.Goal == detection+": kube-controller-manager written after machine-controller-manager and cluster-autoscaler" {
			assert.False(t, g.Met, "6.1 s is over the level wait")
		}
	}
}

// dropSteadyGoals leaves out the steady goals that TestGoals checks.
func dropSteadyGoals(met map[string]bool) map[string]bool {
	for _, g := range []string{"probe lag at 5000 shoots, 3 replicas", "seed requests per healthy probe", "shoot requests per healthy probe"} {
		delete(met, g)
	}
	return met
}

func TestVerdictOptionsValidate(t *testing.T) {
	valid := func() Options {
		return Options{Name: "x", Scenarios: []string{scenarioBlip, scenarioDetection}, Shoots: []int{50}, Replicas: []int{1},
			Nodes: 3, Repeats: 1, Meltdowns: 1, MeltdownShoots: 1, ProbeWorkers: 1, Duration: time.Second, Interval: time.Second,
			Profile: ProfileBoth, Blip: BlipOptions{Seed: 50, Melt: 30, Replicas: []int{1, 3}},
			Detection: DetectionOptions{Seed: 50, Replicas: 3, Shoots: 5, Rounds: 1, Cases: DetectionCases()}}
	}
	o := valid()
	require.NoError(t, o.Validate())
	for _, tc := range []struct {
		name    string
		change  func(o *Options)
		wantErr string
	}{
		{name: "unknown profile", change: func(o *Options) { o.Profile = "fast" }, wantErr: `--profile "fast"`},
		{name: "blip seed above the largest --shoots", change: func(o *Options) { o.Blip.Seed = 100 }, wantErr: "--blip-seed"},
		{name: "melting more than the blip's seed", change: func(o *Options) { o.Blip.Melt = 51 }, wantErr: "--blip-melt"},
		{name: "no blip replicas", change: func(o *Options) { o.Blip.Replicas = nil }, wantErr: "--blip-replicas"},
		{name: "one detection replica", change: func(o *Options) { o.Detection.Replicas = 1 }, wantErr: "--detection-replicas"},
		{name: "unknown case", change: func(o *Options) { o.Detection.Cases = []string{"steady", "flood"} }, wantErr: `unknown case "flood"`},
		{name: "not run, not checked", change: func(o *Options) { o.Scenarios = []string{scenarioSteady}; o.Profile = "fast"; o.Blip.Melt = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.change(&o)
			err := o.Validate()
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestVerdictStagesRunPerProfile(t *testing.T) {
	b := &bench{opts: Options{Scenarios: []string{scenarioBlip, scenarioDetection}, Shoots: []int{50}, Replicas: []int{1},
		Profile: ProfileBoth, Blip: BlipOptions{Seed: 50, Melt: 30, Replicas: []int{1, 3}}, Detection: DetectionOptions{Seed: 40}}}
	var sizes []int
	for _, st := range inOrder(b.stages()) {
		sizes = append(sizes, st.shoots)
	}
	assert.Equal(t, []int{40, 40, 50, 50, 50, 50}, sizes, "detection per profile, blip per profile × replicas")
	b.opts.Profile = ProfileGardener
	assert.Len(t, b.stages(), 3)
}
