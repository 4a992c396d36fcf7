package sharding

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

func TestUnheldPartitions(t *testing.T) {
	held := func(holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)}}
	}
	live := func(m string) bool { return m == "a" || m == "b" }
	for name, tc := range map[string]struct {
		parts []*coordinationv1.Lease
		want  int
	}{
		"all held by live members":  {[]*coordinationv1.Lease{held("a"), held("b"), held("a")}, 0},
		"no lease in the cache":     {[]*coordinationv1.Lease{held("a"), nil, nil}, 2},
		"released":                  {[]*coordinationv1.Lease{held("a"), held("")}, 1},
		"held by an expired member": {[]*coordinationv1.Lease{held("a"), held("c")}, 1},
		"no partitions":             {nil, 0},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, unheldPartitions(tc.parts, live))
		})
	}
}

func TestSettingsMetrics(t *testing.T) {
	ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
	NewCoordinator(Config{Group: "settings-g", Member: "m", Ring: ring,
		Settings: Settings(ring, []string{"weeder", "prober"}),
		Clock:    clocktesting.NewFakeClock(time.Now()), Log: logr.Discard()})

	assert.InDelta(t, 7, testutil.ToFloat64(partitions.WithLabelValues("settings-g", "m")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(settingsInfo.WithLabelValues("settings-g", "m", "7", "10", "1.25", DefaultPartitionFunction, "prober+weeder")), 0,
		"the info metric carries the settings the member lease advertises")
}

func TestReconcileCountsUnheldPartitions(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(time.Now())
	_, err := leases.Acquire(ctx, store, "unheld-g", 7, 3, nil, "other", "inc", clk.Now())
	require.NoError(t, err)
	c := NewCoordinator(Config{Group: "unheld-g", Member: "m", Incarnation: "i",
		Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
		RetryPeriod: 2 * time.Second, WriteConcurrency: 1,
		WorkContext: ctx, Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard()})
	unheld := func() float64 {
		t.Helper()
		_, err := c.Reconcile(ctx)
		require.NoError(t, err)
		return testutil.ToFloat64(partitionsUnheld.WithLabelValues("unheld-g", "m"))
	}

	assert.InDelta(t, 6, unheld(), 0, "no lease yet but partition 3's, whose holder counts as live")
	held := len(c.Held())
	require.Positive(t, held)
	assert.InDelta(t, 7-held-1, unheld(), 0, "held here or by the live holder of partition 3, or unheld (the ring gives them to that holder)")
	clk.Step(time.Minute)
	held = len(c.Held())
	assert.InDelta(t, 7-held, unheld(), 0, "partition 3's holder expired")
}

func TestRunnerExportsTheLastRenewal(t *testing.T) {
	c := NewCoordinator(Config{Group: "renew-g", Member: "m", Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard()})
	r := &Runner{coordinator: c}
	at := time.Date(2026, 11, 23, 0, 0, 1, 500_000_000, time.UTC)

	r.onRenew(at)

	assert.InDelta(t, float64(at.Unix())+0.5, testutil.ToFloat64(lastRenew.WithLabelValues("renew-g", "m")), 1e-6)
}

// TestMemberMetricsStartAtZero: a member's write refusals and handovers exist from its start, so that
// a rate or quantile over them is 0 or NaN rather than no data.
func TestMemberMetricsStartAtZero(t *testing.T) {
	newMemberMetrics("zero-g", "m")
	for _, reason := range []string{"not_owner", "fenced"} {
		assert.Contains(t, metricstest.Series(guardRefusals), map[string]string{"group": "zero-g", "member": "m", "reason": reason})
	}
	for _, cause := range []string{"release", "expiry"} {
		assert.Contains(t, metricstest.Series(handoverSeconds), map[string]string{"group": "zero-g", "member": "m", "cause": cause})
	}
}
