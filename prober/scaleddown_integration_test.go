package prober_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// TestScaledDownShootStaysExportedWithoutAProbe: dwd_shoot_scaled_down follows the meltdown marker on
// the shoot's dependents, not its probe: a hibernated shoot (no probe) left scaled down is exported at
// 1, at 0 as soon as the marker is removed, and not at all once its dependents are gone.
func TestScaledDownShootStaysExportedWithoutAProbe(t *testing.T) {
	seed.Require(t)
	s := newShoot(t, 2)
	r := startReplica(t, seed.Namespace(t), "dwd-0")
	require.Eventually(t, func() bool { return r.Prober.Probing(s.name) }, 20*time.Second, 50*time.Millisecond)
	s.updateShoot(shootJSON(func(shoot map[string]any) {
		shoot["spec"].(map[string]any)["hibernation"] = map[string]any{"enabled": true}
	}))
	require.Eventually(t, func() bool { return !r.Prober.Probing(s.name) }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return scaledDownValue(t, s.name) == "0" }, 10*time.Second, 50*time.Millisecond,
		"precondition: exported at 0, nothing marked")

	// What a scale-down leaves on a dependent, and what a stopped probe never removes.
	s.markMeltdown("machine-controller-manager", true)
	require.Eventually(t, func() bool { return scaledDownValue(t, s.name) == "1" }, 10*time.Second, 50*time.Millisecond,
		"a marked shoot is exported at 1 though no probe runs")
	assert.False(t, r.Prober.Probing(s.name))
	assert.Equal(t, float64(scaledDownCount(t)), metricstest.Sum(t, "dwd_shoots_scaled_down", nil),
		"the count is the number of shoots exported at 1")

	s.markMeltdown("machine-controller-manager", false)
	require.Eventually(t, func() bool { return scaledDownValue(t, s.name) == "0" }, 10*time.Second, 50*time.Millisecond,
		"0 once the marker is gone")
	for _, name := range dependents {
		s.deleteDeployment(name)
	}
	require.Eventually(t, func() bool { return scaledDownValue(t, s.name) == "" }, 10*time.Second, 50*time.Millisecond,
		"no series once the dependents are gone")
}

// markMeltdown adds the meltdown marker to a dependent of s, or removes it.
func (s *shootNS) markMeltdown(name string, marked bool) {
	var value any // null removes the annotation in a merge patch
	if marked {
		value = ""
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{scaler.MeltdownProtectionAnnotation: value}}})
	require.NoError(s.t, err)
	d := s.deployment(name)
	require.NoError(s.t, seed.Client.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, patch)))
}

// scaledDownValue is the value of dwd_shoot_scaled_down{namespace=ns}, "" when there is none.
func scaledDownValue(t *testing.T, ns string) string {
	for _, m := range metricstest.Gathered(t, "dwd_shoot_scaled_down", map[string]string{"namespace": ns}) {
		return strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64)
	}
	return ""
}

// scaledDownCount is the number of dwd_shoot_scaled_down series at 1.
func scaledDownCount(t *testing.T) int {
	n := 0
	for _, m := range metricstest.Gathered(t, "dwd_shoot_scaled_down", nil) {
		if m.GetGauge().GetValue() == 1 {
			n++
		}
	}
	return n
}
