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
