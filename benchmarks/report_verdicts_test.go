package benchmarks

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarkdownShowsTheVerdictScenarios(t *testing.T) {
	r := sampleResult("latest", 490.5)
	gardener := Profile{Name: "gardener", ProbeIntervalSeconds: 30, GraceSeconds: 40, ProbeTimeoutSeconds: 30, MCMScaleUpDelaySeconds: 30,
		Client: ClientLimits{KubeAPIQPS: 20, KubeAPIBurst: 100}}
	r.Blips = []Blip{{Profile: gardener, SeedShoots: 1000, Melted: 600, Replicas: 3, OutageSeconds: 70, ScaledDownDuringOutage: 598,
		ScaleDownWritesAfterRecovery: 12, LateLimitSeconds: 35, LateScaleDownWrites: 2, LateScaleDownShoots: 1, LateScaleDownMaxSeconds: 41.25,
		LateFromRecoveryWrites: 5, RenewedAgainMaxSeconds: 9.5, WritesBeforeAtZero: 1700, WriteBudgetBeforeAtZero: 5700,
		AtZeroAfterSeconds: 90, Restoring: 600, RestoredP50Seconds: 50, RestoredP99Seconds: 75.5, RestoredMaxSeconds: 80, ProbeLagP99Seconds: 0.25}}
	r.Detection = []Detection{{Profile: gardener, SeedShoots: 1000, Replicas: 3, Rounds: 2, ShootsPerRound: 50, Cases: []DetectionCase{
		{Case: "steady", Samples: 100, TimeoutSeconds: 205, P50Seconds: 38.4, P99Seconds: 57.1, FromLastRenewalP50Seconds: 40, FromLastRenewalP99Seconds: 59,
			Original: "steady", OriginalP50Seconds: 41.5, OriginalP99Seconds: 58.8, KCMAfterMCMSeconds: []float64{0.5}, KCMAfterMCMP50Seconds: 0.5, KCMAfterMCMP99Seconds: 0.5},
		{Case: "new", Samples: 1, NotScaledDown: 1, TimeoutSeconds: 205, KCMNotWritten: 1},
	}}}
	var b strings.Builder
	require.NoError(t, r.WriteMarkdown(&b, nil))
	md := b.String()
	assert.Contains(t, md, "| gardener | 1000 | 600 | 3 | 70 | 598 | 12 | 9.5 | 2, 1, 41.2 (> 35) | 5 | 0 (90) | 1700 / 5700 | 600 | 50.0 / 75.5 / 80.0 | 0 | 0.250 | 0 |")
	assert.Contains(t, md, "## Detection, gardener: interval 30 s, grace 40 s, probe timeout 30 s, MCM scale-up delay 30 s, qps 20, burst 100")
	assert.Contains(t, md, "| steady | 100 | 38.4 / 57.1 | 41.5 / 58.8 (steady) | 40.0 / 59.0 | 0 (in 205 s) | 0.50 / 0.50 (0) |")
	assert.Contains(t, md, "| new | 1 | 0.0 / 0.0 | – | 0.0 / 0.0 | 1 (in 205 s) | 0.00 / 0.00 (1) |")

	path := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, r.WriteJSON(path))
	back, err := ReadResult(path)
	require.NoError(t, err)
	assert.Equal(t, r, back)
	data, err := json.Marshal(r)
	require.NoError(t, err)
	for _, key := range []string{"blips", "late_scale_down_writes", "shoots_at_zero", "restored_p99_seconds", "detection", "original_p99_seconds",
		"kcm_after_mcm_p99_seconds", "from_last_renewal_p99_seconds"} {
		assert.Contains(t, string(data), `"`+key+`"`)
	}
}

// The blip's write budget after the recovery counts what each replica's budget held then, not a full
// burst: a recovery that finds the buckets drained by the scale-downs has only the refill.
func TestTheBlipsWriteBudgetCountsWhatTheBucketsHeld(t *testing.T) {
	assert.Equal(t, 3*(20*30.0+100), writeBudget(3, 20, 100, 30, nil), "no figure: a full burst each")
	assert.Equal(t, 3*20*30.0+40+100, writeBudget(3, 20, 100, 30, map[string]float64{"a": -250, "b": 40, "c": 500}),
		"a bucket in debt counts as empty, none as more than its burst")
	assert.Equal(t, 3*20*30.0+40+2*100, writeBudget(3, 20, 100, 30, map[string]float64{"b": 40}),
		"a replica not scraped counts its whole burst")
	assert.Empty(t, tokensAtRecovery(nil))
	assert.Equal(t, " (the rate, and the tokens the budgets held at the recovery: -250, 40)",
		tokensAtRecovery(map[string]float64{"dwd-1": 40, "dwd-0": -250}))
}
