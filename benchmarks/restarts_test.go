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

// agent is the User-Agent a replica's prober sends.
func agent(member string) string { return "dwd-prober/dev (" + member + ")" }

func TestPartitionEvents(t *testing.T) {
	e := newPartitionEvents()
	e.observe("p-0", "dwd-0", true)
	e.observe("p-1", "dwd-1", true)
	e.observe("p-2", "dwd-2", true)
	e.mark()
	assert.Equal(t, PartitionWrites{}, e.writes, "what the informer listed is no write of the window")

	e.observe("p-0", "", false)      // dwd-0 releases p-0 …
	e.observe("p-0", "dwd-0", false) // … and takes it back
	e.observe("p-1", "dwd-1", false) // a rewrite by its holder
	e.observe("p-2", "dwd-0", false) // another member takes p-2
	e.observe("p-3", "dwd-1", true)  // a new partition lease
	assert.Equal(t, PartitionWrites{Total: 5, Creates: 1, Acquires: 2, Releases: 1, Rewrites: 1}, e.writes)
	assert.Equal(t, 2, e.moved(), "p-2 and the new p-3; p-0 is back with its holder")
	assert.Equal(t, map[string]bool{"p-2": true, "p-3": true}, e.others)

	e.observe("p-2", "dwd-2", false)
	assert.Equal(t, 1, e.moved(), "p-2 is back")
	assert.Len(t, e.others, 2, "held by another meanwhile stays counted")
	e.observe("p-1", "", false)
	assert.Equal(t, 2, e.moved(), "a released partition has moved away from its holder")

	got := minus(PartitionWrites{Total: 7, Creates: 1, Acquires: 3, Releases: 2, Rewrites: 1}, PartitionWrites{Total: 2, Acquires: 1, Releases: 1})
	assert.Equal(t, PartitionWrites{Total: 5, Creates: 1, Acquires: 2, Releases: 1, Rewrites: 1}, got)
}

func TestRestartProbeFigures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	owners := map[string]string{"a": "dwd-0", "b": "dwd-1", "c": "dwd-1"}
	stats := map[string]sim.ProbeStats{
		"a": {Last: at(30), MaxGap: 9 * time.Second, Probers: []sim.Prober{{Agent: agent("dwd-0"), First: at(12), Last: at(30), Probes: 3}}},
		"b": {Last: at(31), MaxGap: 16 * time.Second, Probers: []sim.Prober{
			{Agent: agent("dwd-1"), First: at(5), Last: at(10), Probes: 2}, {Agent: agent("dwd-2"), First: at(26), Last: at(31), Probes: 2}}},
		"c": {Last: at(8), MaxGap: 10 * time.Second, Probers: []sim.Prober{{Agent: agent("dwd-1"), First: at(8), Last: at(8), Probes: 1}}},
	}

	assert.Equal(t, 1, probedByOthers(stats, owners), "b was probed by dwd-2")

	gaps := summarizeGaps(stats, owners, at(35), 15*time.Second)
	assert.ElementsMatch(t, []float64{9, 16, 27}, gaps.gaps, "c's open gap counts at the window's end")
	assert.Equal(t, 2, gaps.overLimit)
	assert.Equal(t, map[string]float64{"dwd-0": 9, "dwd-1": 27}, gaps.longestBy)
	assert.Equal(t, map[string]int{"dwd-0": 1, "dwd-1": 2}, gaps.shootsBy)

	started := map[string]time.Time{"dwd-0": at(20), "dwd-1": at(9)}
	assert.Equal(t, 1, notResumed(stats, owners, started), "c's owner has not probed it since its restart; b's has")
	started["dwd-1"] = at(11)
	assert.Equal(t, 2, notResumed(stats, owners, started), "dwd-2's probes of b do not count")
	assert.Equal(t, 0, notResumed(stats, owners, map[string]time.Time{}), "no restart: any probe by the owner in the window counts")

	assert.Equal(t, map[string]time.Time{"a": at(12), "b": at(5), "c": at(8)}, firstByOwner(stats, owners))
	delete(stats, "c")
	assert.Equal(t, map[string]time.Time{"a": at(12), "b": at(5)}, firstByOwner(stats, owners), "a shoot not probed is left out")
}

func TestCounterIncreaseCountsARestartFromZero(t *testing.T) {
	counter := func(v float64) map[string]*dto.MetricFamily {
		return map[string]*dto.MetricFamily{"c": {Metric: []*dto.Metric{{Counter: &dto.Counter{Value: ptr.To(v)}}}}}
	}
	a := snapshot{metrics: map[string]map[string]*dto.MetricFamily{"dwd-0": counter(5), "dwd-1": counter(5)}}
	b := snapshot{metrics: map[string]map[string]*dto.MetricFamily{"dwd-0": counter(7), "dwd-1": counter(2), "dwd-2": counter(1)}}
	assert.Equal(t, 2.0, counterIncrease(a, b, "dwd-0", "c", ""))
	assert.Equal(t, 2.0, counterIncrease(a, b, "dwd-1", "c", ""), "restarted: its count since")
	assert.Equal(t, 1.0, counterIncrease(a, b, "dwd-2", "c", ""), "new")
}

func TestRestartGoals(t *testing.T) {
	r := &Result{
		Settings: Settings{ProbeIntervalSeconds: 10},
		Rolling:  &Rolling{Shoots: 300, Replicas: 3, LongestGapSeconds: 15, GapLimitSeconds: 15},
		Outage:   &Outage{Shoots: 300, Replicas: 3, OutageSeconds: 60},
	}
	met := func() map[string]bool {
		m := map[string]bool{}
		for _, g := range goals(r) {
			m[g.Goal] = g.Met
		}
		return m
	}
	assert.Equal(t, map[string]bool{
		"rolling restart of 3 replicas at 300 shoots: shoots handed to another replica":           true,
		"rolling restart of 3 replicas at 300 shoots: longest probe gap":                          true, // ≤ 15
		"seed API outage of 60 s, 3 replicas at 300 shoots: partitions whose holder changed":      true,
		"seed API outage of 60 s, 3 replicas at 300 shoots: weeder windows opened after the heal": true,
		"seed API outage of 60 s, 3 replicas at 300 shoots: scale writes":                         true,
	}, met())

	r.Rolling.HandedOver, r.Rolling.LongestGapSeconds = 1, 15.01
	r.Outage.PartitionsMoved, r.Outage.WeederWindowsOpened, r.Outage.ScaleWritesHealed = 1, map[string]float64{"kube-apiserver": 1}, 1
	for goal, ok := range met() {
		assert.False(t, ok, goal)
	}
}

func TestRestartScenarios(t *testing.T) {
	o := Options{Name: "x", Scenarios: []string{scenarioRolling, scenarioOutage}, Shoots: []int{100, 300}, Replicas: []int{1, 3},
		Nodes: 3, Repeats: 1, Meltdowns: 1, MeltdownShoots: 1, ProbeWorkers: 1, Duration: time.Second, Interval: time.Second, Outage: time.Minute}
	require.NoError(t, o.Validate())
	o.Outage = 0
	assert.ErrorContains(t, o.Validate(), "--outage-duration")
	o.Scenarios = []string{scenarioSteady}
	assert.NoError(t, o.Validate(), "the outage duration is checked only when the scenario runs")

	b := &bench{opts: Options{Scenarios: []string{scenarioOutage, scenarioSteady, scenarioRolling}, Shoots: []int{100, 300}, Replicas: []int{1, 3}}}
	var sizes []int
	for _, st := range inOrder(b.stages()) {
		sizes = append(sizes, st.shoots)
	}
	assert.Equal(t, []int{100, 100, 300, 300, 300, 300}, sizes, "rolling and outage at the largest load, after steady there")
}
