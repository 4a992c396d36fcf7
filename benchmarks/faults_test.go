package benchmarks

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

func TestWriteFloor(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		writes, replicas, burst int
		qps, want               float64
	}{
		{name: "5,000 shoots on 3 replicas at 20 qps after bursts of 100", writes: 15000, replicas: 3, qps: 20, burst: 100, want: 245},
		{name: "50 shoots, the original's limits", writes: 150, replicas: 1, qps: 5, burst: 10, want: 28},
		{name: "the bursts cover the writes", writes: 250, replicas: 3, qps: 20, burst: 100, want: 0},
		{name: "no replicas", writes: 10, replicas: 0, qps: 20, burst: 100, want: 0},
		{name: "no rate", writes: 10, replicas: 1, qps: 0, burst: 1, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, writeFloor(tc.writes, tc.replicas, tc.qps, tc.burst), 1e-9)
		})
	}
}

func TestSpreadNamesShootsEvenly(t *testing.T) {
	assert.Equal(t, []string{sim.ShootName(0), sim.ShootName(3), sim.ShootName(6)}, spread(3, 10))
	assert.Equal(t, []string{sim.ShootName(0), sim.ShootName(1), sim.ShootName(2)}, spread(3, 3), "all")
	assert.Len(t, spread(300, 1000), 300)
	assert.Empty(t, spread(0, 10))
}

func TestSamplesCountAShootWithoutAMomentAsTheTimeout(t *testing.T) {
	start := time.Unix(1000, 0)
	moments := map[string]time.Time{"a": start.Add(2 * time.Second), "b": start.Add(4 * time.Second), "other": start}
	from := func(string) time.Time { return start }
	s := since(from, []string{"a", "b", "c"}, moments, time.Minute)
	assert.Equal(t, []float64{2, 4}, s.done)
	assert.Equal(t, 1, s.missing)
	p50, p99, most := s.quantiles()
	assert.Equal(t, []float64{4, 60, 60}, []float64{p50, p99, most})

	p50, p99, most = since(from, nil, moments, time.Minute).quantiles()
	assert.Equal(t, []float64{0, 0, 0}, []float64{p50, p99, most}, "nothing to measure")
}

func TestScaleEventsRecordChangesSinceTheMark(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	e := newScaleEvents()
	for name, want := range sim.Dependents {
		e.observe("a", name, want, at(0))
	}
	e.observe("a", "other-deployment", 0, at(0))
	e.mark()
	_, up, _ := e.state("a")
	assert.True(t, up, "an unrelated Deployment does not count")

	e.observe("a", "machine-controller-manager", 0, at(1))
	e.observe("a", "cluster-autoscaler", 0, at(2))
	assert.Equal(t, map[string]time.Time{"a": at(1)}, e.below, "the first dependent below its replicas")
	assert.Empty(t, e.down, "not all down yet")
	e.observe("a", "kube-controller-manager", 0, at(3))
	assert.Equal(t, map[string]time.Time{"a": at(3)}, e.down)
	e.observe("a", "kube-controller-manager", 0, at(4))
	assert.Equal(t, map[string]time.Time{"a": at(3)}, e.down, "the first moment is kept")
	assert.Empty(t, e.up, "the state at the mark is no change")
	assert.Equal(t, 3, e.writes, "three changes; writing the same replicas again is none")

	e.mark()
	for i, name := range []string{"kube-controller-manager", "machine-controller-manager", "cluster-autoscaler"} {
		e.observe("a", name, sim.Dependents[name], at(10+i))
	}
	assert.Equal(t, map[string]time.Time{"a": at(12)}, e.up, "restored when the last dependent is back")
	assert.Empty(t, e.down)

	e.observe("b", "kube-controller-manager", 0, at(20))
	down, up, below := e.state("b")
	assert.Equal(t, []bool{false, false, true}, []bool{down, up, below}, "dependents not seen count as at their replicas")
	assert.Equal(t, 3, e.writes, "the mark forgot the earlier writes; a dependent's first sighting is none")
}

func TestLieList(t *testing.T) {
	o := LiesOptions{HugeLeases: 200000, HugeShoots: 2, CacheLag: time.Minute, SlowBody: 28 * time.Second,
		NodeClock: -90 * time.Second, ServerClock: time.Minute}
	got := lieList(o, 10*time.Second)
	var names []string
	for _, l := range got {
		names = append(names, l.name)
		require.NoError(t, l.scenario.Validate(), l.name)
	}
	assert.Equal(t, []string{"stale cache, leases 1m0s old", "lease list body 28s late", "node clocks -1m30s", "server clock +1m0s",
		"200000 extra leases"}, names)
	assert.Equal(t, 30*time.Second, got[0].hold, "3 probe intervals by default")
	assert.Equal(t, 58*time.Second, got[1].hold, "a slow body's delay is added")
	assert.Equal(t, sim.Scenario{Kind: sim.StaleCache, CacheLag: time.Minute}, got[0].scenario)
	assert.Equal(t, sim.Scenario{ExtraLeases: 200000}, got[4].scenario)
	assert.Equal(t, []int{0, 0, 0, 0, 2}, []int{got[0].shoots, got[1].shoots, got[2].shoots, got[3].shoots, got[4].shoots})

	o.Duration = time.Minute
	assert.Equal(t, time.Minute, lieList(o, 10*time.Second)[2].hold)
}

func TestBenchProberConfig(t *testing.T) {
	cfg := benchProberConfig(10*time.Second, 30*time.Second, 30*time.Second)
	for _, line := range []string{"probeInterval: 10s", "probeTimeout: 30s", "scaleUp: {level: 1, initialDelay: 30s}", "initialDelay: 2s\n"} {
		assert.Contains(t, cfg, line)
	}
	assert.Equal(t, sim.ProberConfig, benchProberConfig(2*time.Second, 5*time.Second, 2*time.Second), "the demo's own values")
}

func TestClientLimitsFollowTheBinarysFlags(t *testing.T) {
	all := map[string]bool{flagScaleWorkers: true, flagScaleQPS: true, flagScaleBurst: true}
	for _, tc := range []struct {
		name       string
		profile    replicaProfile
		has        map[string]bool
		want       ClientLimits
		wantBudget []float64 // qps, burst
	}{
		{name: "an old binary scales through the seed client", profile: gardenerProfile, has: map[string]bool{},
			want: ClientLimits{KubeAPIQPS: 20, KubeAPIBurst: 100}, wantBudget: []float64{20, 100}},
		{name: "a new binary gets the scale budget", profile: gardenerProfile, has: all,
			want:       ClientLimits{KubeAPIQPS: 20, KubeAPIBurst: 100, ScaleWorkers: 16, ScaleQPS: 20, ScaleBurst: 100},
			wantBudget: []float64{20, 100}},
		{name: "the original's limits, no scale flags, an old binary", profile: originalProfile, has: map[string]bool{},
			want: ClientLimits{KubeAPIQPS: 5, KubeAPIBurst: 10}, wantBudget: []float64{5, 10}},
		{name: "the original's limits, no scale flags, a new binary: its defaults", profile: originalProfile, has: all,
			want: ClientLimits{KubeAPIQPS: 5, KubeAPIBurst: 10}, wantBudget: []float64{20, 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.profile.limits(tc.has)
			assert.Equal(t, tc.want, got)
			qps, burst := scaleBudget(got, tc.has)
			assert.Equal(t, tc.wantBudget, []float64{qps, float64(burst)})
		})
	}
}

// counterFamily is a scraped counter with one sample per label set.
func counterFamily(name string, samples map[[2]string]float64, labels [2]string) map[string]*dto.MetricFamily {
	f := &dto.MetricFamily{}
	for values, v := range samples {
		f.Metric = append(f.Metric, &dto.Metric{
			Label:   []*dto.LabelPair{{Name: ptr.To(labels[0]), Value: ptr.To(values[0])}, {Name: ptr.To(labels[1]), Value: ptr.To(values[1])}},
			Counter: &dto.Counter{Value: ptr.To(v)},
		})
	}
	return map[string]*dto.MetricFamily{name: f}
}

func TestCountersByLabel(t *testing.T) {
	labels := [2]string{"api", "client"}
	a := snapshot{metrics: map[string]map[string]*dto.MetricFamily{
		"dwd-0": counterFamily("dwd_api_requests_total", map[[2]string]float64{{"seed", "watchdog"}: 10, {"seed", "sharding"}: 5, {"shoot", "prober"}: 100}, labels),
	}}
	b := snapshot{metrics: map[string]map[string]*dto.MetricFamily{
		"dwd-0": counterFamily("dwd_api_requests_total", map[[2]string]float64{{"seed", "watchdog"}: 12, {"seed", "sharding"}: 9, {"seed", "scaler"}: 30, {"shoot", "prober"}: 400}, labels),
		"dwd-1": counterFamily("dwd_api_requests_total", map[[2]string]float64{{"seed", "scaler"}: 1000}, labels), // not in a: left out
	}}
	assert.Equal(t, map[string]float64{"watchdog": 2, "sharding": 4, "scaler": 30}, countersByLabel(a, b, "dwd_api_requests_total", "api=seed", "client"))
	assert.Empty(t, countersByLabel(a, b, "dwd_missing_total", "", "client"))
}

func TestBenchOptionsValidate(t *testing.T) {
	valid := func() Options {
		return Options{Name: "x", Scenarios: []string{scenarioMassMeltdown, scenarioLies}, Shoots: []int{100}, Replicas: []int{1, 3},
			Nodes: 3, Repeats: 1, Meltdowns: 1, MeltdownShoots: 1, ProbeWorkers: 1, Duration: time.Second, Interval: time.Second,
			Mass: MassOptions{OriginalShoots: 50, Seed: 100, Melt: 30, Replicas: []int{1, 3}},
			Lies: LiesOptions{Shoots: 100, Replicas: 1, HugeLeases: 10, HugeShoots: 2}}
	}
	o := valid()
	require.NoError(t, o.Validate())
	assert.True(t, o.runs(scenarioMassOriginal) && o.runs(scenarioMassRecover) && o.runs(scenarioMassAll), "mass-meltdown stands for its parts")
	assert.False(t, o.runs(scenarioSteady))

	for _, tc := range []struct {
		name    string
		change  func(o *Options)
		wantErr string
	}{
		{name: "unknown scenario", change: func(o *Options) { o.Scenarios = append(o.Scenarios, "lying") }, wantErr: `unknown scenario "lying"`},
		{name: "recover seed above the largest --shoots", change: func(o *Options) { o.Mass.Seed = 1000 }, wantErr: "--mass-meltdown-seed"},
		{name: "melting more than the seed", change: func(o *Options) { o.Mass.Melt = 101 }, wantErr: "--mass-meltdown-melt"},
		{name: "original above the largest --shoots", change: func(o *Options) { o.Mass.OriginalShoots = 101 }, wantErr: "--mass-meltdown-original-shoots"},
		{name: "lies above the largest --shoots", change: func(o *Options) { o.Lies.Shoots = 101 }, wantErr: "--lies-shoots"},
		{name: "more huge shoots than lying ones", change: func(o *Options) { o.Lies.HugeShoots = 101 }, wantErr: "--huge-shoots"},
		{name: "a part alone is checked", change: func(o *Options) { o.Scenarios = []string{scenarioMassRecover}; o.Mass.Melt = 0 }, wantErr: "--mass-meltdown-melt"},
		{name: "a part not run is not checked", change: func(o *Options) { o.Scenarios = []string{scenarioMassAll}; o.Mass.Melt = 0 }},
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

func TestStagesRunInTheOrderOfTheShootsTheyNeed(t *testing.T) {
	b := &bench{opts: Options{Scenarios: []string{scenarioSteady, scenarioHandover, scenarioMassMeltdown, scenarioLies},
		Shoots: []int{1000, 5000}, Replicas: []int{1, 3},
		Mass: MassOptions{OriginalShoots: 50, Seed: 1000, Melt: 300, Replicas: []int{1, 3}}, Lies: LiesOptions{Shoots: 1000}}}
	var sizes []int
	for _, st := range inOrder(b.stages()) {
		sizes = append(sizes, st.shoots)
	}
	// original (50); steady 1000 × 1, × 3; recover × 2; lies; steady 5000 × 1, × 3; handover; all.
	assert.Equal(t, []int{50, 1000, 1000, 1000, 1000, 1000, 5000, 5000, 5000, 5000}, sizes)
}

func TestFaultGoals(t *testing.T) {
	r := &Result{
		Settings: Settings{ProbeIntervalSeconds: 10},
		MassMeltdown: &MassMeltdown{
			OriginalLimits: &MeltdownBatch{Melted: 50, ScaledDownP99Seconds: 19.5},
			Recover: []MeltdownBatch{
				{Melted: 300, SeedShoots: 1000, Replicas: 1, MCMScaleUpDelaySeconds: 30, RestoreFloorSeconds: 40, RestoredP99Seconds: 94.9, ProbeLagP99Seconds: 0.5},
				{Melted: 300, SeedShoots: 1000, Replicas: 3, MCMScaleUpDelaySeconds: 30, RestoreFloorSeconds: 0, RestoredP99Seconds: 56, ProbeLagP99Seconds: 0.2, MissedCycles: 1},
			},
			All: &MeltdownBatch{Melted: 5000, Replicas: 3, ScaleDownFloorSeconds: 245, ScaledDownMaxSeconds: 290},
		},
		Lies: &Lies{Shoots: 1000, Replicas: 1, Parts: []LiePart{
			{Lie: "stale", Shoots: 1000, PeakRSSBytes: []float64{900 << 20}},
			{Lie: "huge", Shoots: 2, ExtraLeases: 200000, PeakRSSBytes: []float64{511 << 20}},
		}},
	}
	met := map[string]bool{}
	for _, g := range goals(r) {
		met[g.Goal] = g.Met
	}
	assert.Equal(t, map[string]bool{
		"50 shoots melt at once, 1 replica, original client limits (qps 0, burst 0)": true,
		"300 of 1000 shoots melt and recover, 1 replicas: restored":                  true, // 10 + 10 + 30 + 40 + 5 = 95
		"300 of 1000 shoots melt and recover, 1 replicas: probe lag meanwhile":       true,
		"300 of 1000 shoots melt and recover, 3 replicas: restored":                  false, // 55
		"300 of 1000 shoots melt and recover, 3 replicas: probe lag meanwhile":       false, // a missed cycle
		"all 5000 shoots melt at once, 3 replicas: all scaled down":                  true,  // ≤ 294
		"lies at 1000 shoots, 1 replicas: spurious scale-downs":                      true,
		"replica memory while 2 shoots answer huge":                                  true, // the stale part's memory is no goal
	}, met)

	r.MassMeltdown.All.ScaleDownFloorSeconds = 0
	r.MassMeltdown.OriginalLimits.NotScaledDown = 1
	r.Lies.Parts[0].SpuriousScaleDowns = 1
	met = map[string]bool{}
	for _, g := range goals(r) {
		met[g.Goal] = g.Met
	}
	assert.False(t, met["50 shoots melt at once, 1 replica, original client limits (qps 0, burst 0)"], "a shoot left up fails it")
	assert.False(t, met["lies at 1000 shoots, 1 replicas: spurious scale-downs"])
	assert.NotContains(t, met, "all 5000 shoots melt at once, 3 replicas: all scaled down", "no floor, no goal")
}
