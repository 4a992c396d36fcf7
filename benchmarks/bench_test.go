package benchmarks

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name    string
		q       float64
		buckets []bucket
		want    float64
	}{
		{"no observations", 0.99, []bucket{{0.1, 0}, {inf, 0}}, 0},
		{"no buckets", 0.5, nil, 0},
		{"interpolated in the first bucket from 0", 0.5, []bucket{{0.1, 10}, {1, 10}, {inf, 10}}, 0.05},
		{"interpolated within a later bucket", 0.99, []bucket{{0.1, 90}, {1, 100}, {inf, 100}}, 0.91},
		{"in +Inf: the highest finite bound", 0.99, []bucket{{0.1, 50}, {1, 50}, {inf, 100}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, histogramQuantile(tc.q, tc.buckets), 1e-9)
		})
	}
}

func TestSampleQuantileIsNearestRank(t *testing.T) {
	samples := []float64{5, 1, 4, 2, 3, 10, 6, 7, 9, 8}
	assert.Equal(t, 10.0, sampleQuantile(0.99, samples), "p99 of 10 samples is the largest")
	assert.Equal(t, 5.0, sampleQuantile(0.5, samples))
	assert.Equal(t, 1.0, sampleQuantile(0, samples))
	assert.Equal(t, 0.0, sampleQuantile(0.99, nil))
	assert.Equal(t, []float64{5, 1, 4, 2, 3, 10, 6, 7, 9, 8}, samples, "the samples are left in their order")
}

func TestMemberOf(t *testing.T) {
	for agent, want := range map[string]string{
		"dwd-prober/v1.2.3 (dwd-0)":                   "dwd-0",
		"dwd-prober/dev (dependency-watchdog-abc-12)": "dependency-watchdog-abc-12",
		"dwd-prober":                    "",
		"dwd-prober/dev":                "",
		"dwd-prober/dev (dwd-0":         "",
		"kubectl/v1.36.3 (linux/amd64)": "",
		"":                              "",
	} {
		assert.Equal(t, want, memberOf(agent), agent)
	}
}

// histogramFamily is a scraped dwd_probe_lag_seconds with cumulative counts per bound; the text
// format lists +Inf with the sample count.
func histogramFamily(counts map[float64]uint64, total uint64) map[string]*dto.MetricFamily {
	h := &dto.Histogram{SampleCount: ptr.To(total)}
	for _, upper := range []float64{0.1, 1, math.Inf(1)} {
		n := total
		if !math.IsInf(upper, 1) {
			n = counts[upper]
		}
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: ptr.To(upper), CumulativeCount: ptr.To(n)})
	}
	return map[string]*dto.MetricFamily{"dwd_probe_lag_seconds": {Metric: []*dto.Metric{{Histogram: h}}}}
}

func TestHistogramDeltaSumsReplicasBetweenSnapshots(t *testing.T) {
	a := snapshot{metrics: map[string]map[string]*dto.MetricFamily{
		"dwd-0": histogramFamily(map[float64]uint64{0.1: 10, 1: 10}, 10),
		"dwd-1": histogramFamily(map[float64]uint64{0.1: 0, 1: 0}, 0),
	}}
	b := snapshot{metrics: map[string]map[string]*dto.MetricFamily{
		"dwd-0": histogramFamily(map[float64]uint64{0.1: 100, 1: 109}, 110),
		"dwd-1": histogramFamily(map[float64]uint64{0.1: 50, 1: 50}, 50),
		"dwd-2": histogramFamily(map[float64]uint64{0.1: 1000, 1: 1000}, 1000), // not in a: left out
	}}
	got := histogramDelta(a, b, "dwd_probe_lag_seconds")
	assert.Equal(t, []bucket{{0.1, 140}, {1, 149}, {math.Inf(1), 150}}, got, "+Inf counted once")
	assert.InDelta(t, 0.95, histogramQuantile(0.99, got), 1e-9, "rank 148.5 is 8.5 of the 9 in (0.1, 1]")
}

func TestOwnershipMatchesTheRing(t *testing.T) {
	own, err := newOwnership([]string{"dwd-2", "dwd-0", "dwd-1"})
	require.NoError(t, err)
	held := own.held()
	total := 0
	for _, n := range held {
		total += n
	}
	assert.Equal(t, sim.Partitions, total)
	assert.Len(t, held, 3)
	owners := map[string]int{}
	for i := range 3000 {
		owners[own.owner(sim.ShootName(i))]++
	}
	for member, n := range owners {
		assert.InDelta(t, 1000, n, 150, "%s owns about a third of the shoots", member)
	}
}

func TestGoals(t *testing.T) {
	r := &Result{
		Settings: Settings{ProbeIntervalSeconds: 10, MemberLeaseDurationSeconds: 15},
		Steady: []SteadyRun{
			{Shoots: 1000, Replicas: 1, CPUCores: []float64{0.2}, SeedRequestsPerProbe: 0.005, ShootRequestsPerProbe: 1.1001},
			{Shoots: 1000, Replicas: 3, CPUCores: []float64{0.07, 0.09, 0.08}, SeedRequestsPerProbe: 0.015, ShootRequestsPerProbe: 1.1004},
			{Shoots: 5000, Replicas: 3, ProbeLagP99Seconds: 0.5, CPUCores: []float64{0.3, 0.3, 0.3},
				SeedRequestsPerProbe: 0.003, SeedWatchdogRequestsPerProbe: 0.0002, ShootRequestsPerProbe: 1.0998},
		},
		Handover: &Handover{HandoverGracefulP99Seconds: 2.1, HandoverKillP99Seconds: 16.5},
		Meltdown: &Meltdown{DetectionToScaledownP99Seconds: 11.2},
	}
	met := map[string]bool{}
	for _, g := range goals(r) {
		met[g.Goal] = g.Met
	}
	assert.Equal(t, map[string]bool{
		"probe lag at 5000 shoots, 3 replicas":                           true,
		"seed requests per healthy probe":                                true, // renewals counted at 5000 × 3 only
		"shoot requests per healthy probe":                               true,
		"CPU of each of 3 replicas over a single replica's, 1000 shoots": false, // 0.09 / 0.2 = 0.45
		"graceful handover":                                              false,
		"kill -9 handover":                                               true,
		"meltdown detection to first scale-down":                         true,
	}, met, "5000 × 3 has no single-replica run to compare with")
}

// With the announced leave the graceful handover's goal is how late a moved shoot's probe came, not
// the time from the signal, which includes the lead by design.
func TestTheGracefulGoalIsTheMovedShootsLatenessOnceMeasured(t *testing.T) {
	before := gracefulGoal(&Handover{HandoverGracefulP99Seconds: 2.1})
	assert.Equal(t, "graceful handover", before.Goal)
	assert.False(t, before.Met)
	late := gracefulGoal(&Handover{HandoverGracefulP99Seconds: 6.2, GracefulLateSeconds: []float64{0, 0.4}, HandoverGracefulLateP99: 0.4})
	assert.True(t, late.Met)
	assert.Contains(t, late.Measured, "p99 0.40 s")
	assert.Contains(t, late.Measured, "6.20 s")
	assert.False(t, gracefulGoal(&Handover{GracefulLateSeconds: []float64{2.5}, HandoverGracefulLateP99: 2.5}).Met)
}
