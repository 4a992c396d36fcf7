package benchmarks

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleResult(name string, probesPerSecond float64) *Result {
	return &Result{
		Name: name, Command: "dwd-sim bench", Started: "2026-11-21T00:00:00Z",
		Machine:  Machine{Cores: 2, MemoryBytes: 24 << 30, GoVersion: "go1.26.8", OS: "linux", Arch: "amd64"},
		Settings: Settings{ProbeIntervalSeconds: 10, MemberLeaseDurationSeconds: 15, Partitions: 887, NodesPerShoot: 3, ProbeWorkers: 32},
		Steady: []SteadyRun{{Shoots: 5000, Replicas: 3, ProbesPerSecond: probesPerSecond, ProbeLagP99Seconds: 0.2,
			ProbesPerSecondPerReplica: []float64{150, 160, 170}, CPUCores: []float64{0.3, 0.4, 0.5}, RSSBytes: []float64{100 << 20, 110 << 20, 120 << 20}}},
		Handover: &Handover{Shoots: 5000, Replicas: 3, Repeats: 1, GracefulSeconds: []float64{1.25}, HandoverGracefulP99Seconds: 1.25},
		Meltdown: &Meltdown{Shoots: 5000, Samples: 2, DetectionToScaledownP99Seconds: 10.5},
		Goals:    []Goal{{Goal: "graceful handover", Target: "p99 ≤ 2 s", Measured: "p99 1.25 s", Met: true}},
	}
}

func TestResultJSONUsesTheIssuesKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	r := sampleResult("baseline", 480)
	require.NoError(t, r.WriteJSON(path))
	back, err := ReadResult(path)
	require.NoError(t, err)
	assert.Equal(t, r, back)

	data, err := json.Marshal(r)
	require.NoError(t, err)
	for _, key := range []string{"probes_per_second", "probe_lag_p50_seconds", "probe_lag_p99_seconds", "missed_cycles",
		"cpu_seconds_per_1000_probes", "rss_bytes", "seed_requests_per_probe", "shoot_requests_per_probe",
		"handover_graceful_p99_seconds", "handover_join_p99_seconds", "handover_kill_p99_seconds",
		"moved_fraction_over_ideal", "balance_max_over_mean", "detection_to_scaledown_p99_seconds", "cores", "memory_bytes", "go_version", "command"} {
		assert.Contains(t, string(data), `"`+key+`"`)
	}
}

func TestReadResultNamesTheFile(t *testing.T) {
	_, err := ReadResult(filepath.Join("testdata", "missing.json"))
	require.Error(t, err)
}

func TestMarkdownShowsTheBaselineInBrackets(t *testing.T) {
	var b strings.Builder
	require.NoError(t, sampleResult("latest", 490.5).WriteMarkdown(&b, sampleResult("baseline", 480)))
	md := b.String()
	assert.Contains(t, md, "| 5000 | 3 | 490.5 (480.0) |")
	assert.Contains(t, md, "| graceful handover | p99 ≤ 2 s | p99 1.25 s | yes |")
	assert.Contains(t, md, "| 0.300, 0.400, 0.500 |")
	assert.Contains(t, md, "| 100, 110, 120 |", "RSS in MiB")

	b.Reset()
	require.NoError(t, sampleResult("latest", 490.5).WriteMarkdown(&b, nil))
	assert.Contains(t, b.String(), "| 5000 | 3 | 490.5 |")
}

func TestChartPointsAverageTheReplicas(t *testing.T) {
	points := sampleResult("x", 480).ChartPoints()
	require.Len(t, points, 1)
	assert.Equal(t, 5000, points[0].Shoots)
	assert.Equal(t, 3, points[0].Replicas)
	assert.InDelta(t, 160, points[0].ProbesPerSecondPerReplica, 1e-9)
	assert.InDelta(t, 0.4, points[0].CPUCoresPerReplica, 1e-9)
}

func TestMarkdownShowsTheFaultScenarios(t *testing.T) {
	r := sampleResult("latest", 490.5)
	limits := ClientLimits{KubeAPIQPS: 20, KubeAPIBurst: 100, ScaleWorkers: 16, ScaleQPS: 20, ScaleBurst: 100}
	r.MassMeltdown = &MassMeltdown{
		OriginalLimits: &MeltdownBatch{SeedShoots: 50, Melted: 50, Replicas: 1, Client: ClientLimits{KubeAPIQPS: 5, KubeAPIBurst: 10},
			ScaledDownP50Seconds: 12, ScaledDownP99Seconds: 19.25, ScaledDownMaxSeconds: 19.5, ScaleDownTimeoutSeconds: 180},
		All: &MeltdownBatch{SeedShoots: 5000, Melted: 5000, Replicas: 3, Client: limits, ScaleDownFloorSeconds: 245,
			SeedRequestsByClient: map[string]float64{"scaler": 15000, "watchdog": 15000}, SeedRequestsPerScaledResource: 2, ScalerRequestsPerScaledResource: 1},
	}
	r.Lies = &Lies{Shoots: 1000, Replicas: 1, ProbeTimeoutSeconds: 30, Client: limits, Parts: []LiePart{
		{Lie: "stale cache", Shoots: 1000, HeldSeconds: 30, ProbesByResult: map[string]float64{"healthy": 2990, "no_action": 10},
			ConsistentLeaseLists: 1000, CachedLeaseLists: 3000, PeakRSSBytes: []float64{200 << 20}},
	}}
	var b strings.Builder
	require.NoError(t, r.WriteMarkdown(&b, nil))
	md := b.String()
	assert.Contains(t, md, "| original limits | 50 | 50 | 1 | qps 5, burst 10 | 12.0 / 19.2 / 19.5 | 0 (in 180 s) |")
	assert.Contains(t, md, "| all | 5000 | 5000 | 3 | qps 20, burst 100; scale workers 16, qps 20, burst 100 |")
	assert.Contains(t, md, "| 2.00, 1.00 (scaler 15000, watchdog 15000) |")
	assert.Contains(t, md, "1000 shoots, 1 replicas, probe timeout 30 s, qps 20, burst 100; scale workers 16, qps 20, burst 100.")
	assert.Contains(t, md, "| stale cache | 1000 | 30 | 0 | healthy 2990, no_action 10 | 1000 / 3000 | 0 | 200 |")

	path := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, r.WriteJSON(path))
	back, err := ReadResult(path)
	require.NoError(t, err)
	assert.Equal(t, r, back)
}
