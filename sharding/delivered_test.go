package sharding

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// A renewal starts no reconcile, so the one that reads it may come up to a retry period later: the
// member is judged from the moment the cache delivered the renewal, as if a reconcile had run then,
// so that a crashed member expires a lease duration after its last renewal arrived, not a retry period
// later. A version the cache has not reported yet counts from the reconcile that reads it.
func TestAMemberIsJudgedFromTheMomentItsRenewalArrived(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	t0 := time.Now()
	clk := clocktesting.NewFakeClock(t0)
	delivered := newDeliveries(clk)
	for _, m := range []string{"m", "n"} {
		l, err := store.Create(ctx, memberLease("g", m, "prober", t0, t0, ""))
		require.NoError(t, err)
		delivered.record(nil, l)
	}
	ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
	c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i", Ring: ring,
		LeaseDuration: 15 * time.Second, RetryPeriod: 2 * time.Second, WriteConcurrency: 4,
		Settings: Settings(ring, []string{"prober"}), SeenAt: delivered.seenAt,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard()})
	seen := func() time.Time {
		t.Helper()
		since, _, ok := c.observer.Seen("n")
		require.True(t, ok)
		return since
	}

	clk.Step(1500 * time.Millisecond)
	reconcile(t, c)
	assert.Equal(t, t0, seen(), "first seen when the cache delivered it")

	before, err := store.Get(ctx, leases.MemberLeaseName("g", "n"))
	require.NoError(t, err)
	clk.Step(time.Second)
	renew(t, store, "n", clk.Now())
	after, err := store.Get(ctx, leases.MemberLeaseName("g", "n"))
	require.NoError(t, err)
	delivered.record(before, after)
	arrived := clk.Now()
	clk.Step(1900 * time.Millisecond)
	reconcile(t, c)
	assert.Equal(t, arrived, seen(), "the renewal counts from its arrival")
	left, live := c.observer.ExpiresIn("n", clk.Now())
	require.True(t, live)
	assert.Equal(t, 15*time.Second-1900*time.Millisecond, left, "expires a lease duration after the renewal arrived")

	clk.Step(time.Second)
	renew(t, store, "n", clk.Now().Add(-time.Hour)) // whatever its writer's clock says
	clk.Step(500 * time.Millisecond)
	reconcile(t, c)
	assert.Equal(t, clk.Now(), seen(), "a version not delivered yet counts from the reconcile that reads it")

	delivered.record(after, nil)
	assert.Equal(t, clk.Now(), delivered.seenAt(after, clk.Now()), "a deleted lease is forgotten")
}

// Only a steady renewal of a member lease starts no reconcile: any other change of it, an add, a
// delete and every change of a partition lease start one; so does this member's own renewal while
// its last reconcile left it unready or holding nothing.
func TestOnlyAnotherMembersSteadyRenewalStartsNoReconcile(t *testing.T) {
	t0 := time.Now()
	member := func(name string, renewed time.Time, rv string) *coordinationv1.Lease {
		l := memberLease("g", name, "prober", t0, renewed, rv)
		l.Namespace = "ns"
		return l
	}
	partition := func(renewed time.Time, rv string) *coordinationv1.Lease {
		l := member("m", renewed, rv)
		l.Name = leases.PartitionLeaseName("g", 3)
		l.Labels[leases.KindLabel] = leases.KindPartition
		return l
	}
	own := "ns/" + leases.MemberLeaseName("g", "m")
	settled, unsettled := func() bool { return true }, func() bool { return false }
	later := t0.Add(2 * time.Second)

	assert.False(t, startsReconcile(member("n", t0, "1"), member("n", later, "2"), own, settled), "another member's renewal")
	assert.False(t, startsReconcile(member("m", t0, "1"), member("m", later, "2"), own, settled), "its own renewal, settled")
	assert.True(t, startsReconcile(member("m", t0, "1"), member("m", later, "2"), own, unsettled), "its own renewal, unsettled")
	changed := member("n", later, "2")
	changed.Annotations[leases.LeavingAnnotation] = "x"
	assert.True(t, startsReconcile(member("n", t0, "1"), changed, own, settled), "a change of what a member tells")
	holder := member("n", later, "2")
	holder.Spec.HolderIdentity = ptr.To("o")
	assert.True(t, startsReconcile(member("n", t0, "1"), holder, own, settled), "another holder")
	assert.True(t, startsReconcile(nil, member("n", t0, "1"), own, settled), "an add")
	assert.True(t, startsReconcile(member("n", t0, "1"), nil, own, settled), "a delete")
	assert.True(t, startsReconcile(partition(t0, "1"), partition(later, "2"), own, settled), "a partition lease")
}

// The reconcile before a member would go silent comes at that moment, not a retry period later:
// renewals start none, and the caches' prewarm of its share needs the lead before its expiry.
func TestAReconcileComesWhenAMemberWouldGoSilent(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	t0 := time.Now()
	clk := clocktesting.NewFakeClock(t0)
	for _, m := range []string{"m", "n"} {
		_, err := store.Create(ctx, memberLease("g", m, "prober", t0, t0, ""))
		require.NoError(t, err)
	}
	ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
	liveness := &switchLiveness{}
	shown := t0
	liveness.renewalShown.Store(&shown)
	c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i", Ring: ring,
		LeaseDuration: 15 * time.Second, RetryPeriod: 2 * time.Second, WriteConcurrency: 4,
		Settings: Settings(ring, []string{"prober"}), Caches: &gatedCaches{warm: func(int) bool { return true }},
		Store: store, Lister: store, Liveness: liveness, Clock: clk, Log: logr.Discard()})
	reconcile(t, c)

	clk.Step(9 * time.Second)
	renew(t, store, "m", clk.Now())
	after, err := c.Reconcile(ctx)
	require.NoError(t, err)
	assert.Equal(t, 15*time.Second-PrewarmLead-9*time.Second, after, "n goes silent 5 s before its expiry")
	assert.Empty(t, c.prewarmFor)
	clk.Step(after)
	shown = clk.Now()
	liveness.renewalShown.Store(&shown)
	reconcile(t, c)
	assert.Equal(t, "n", c.prewarmFor, "then its share is listed")
}
