package sharding

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/config"
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

// Only a steady renewal of a member or leader lease starts no reconcile: any other change of it, a
// renewal that comes after a silence of half a lease duration (it may have been judged expired), an
// add, a delete and every change of a partition lease start one; so does this member's own renewal
// while it is not settled.
func TestOnlyASteadyRenewalStartsNoReconcile(t *testing.T) {
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
	leader := func(renewed time.Time, rv string) *coordinationv1.Lease {
		l := member("x", renewed, rv)
		l.Name, l.Labels, l.Annotations = "dependency-watchdog-probe", nil, nil
		return l
	}
	own := leases.MemberLeaseName("g", "m")
	settled, unsettled := func() bool { return true }, func() bool { return false }
	later := t0.Add(2 * time.Second)
	const within = 7500 * time.Millisecond
	steady := func(before, after *coordinationv1.Lease, settled func() bool) bool {
		return !startsReconcile(before, after, 2*time.Second, within, own, settled)
	}

	assert.True(t, steady(member("n", t0, "1"), member("n", later, "2"), settled), "another member's renewal")
	assert.True(t, steady(leader(t0, "1"), leader(later, "2"), settled), "a leader's renewal")
	assert.True(t, steady(member("m", t0, "1"), member("m", later, "2"), settled), "its own renewal, settled")
	assert.False(t, steady(member("m", t0, "1"), member("m", later, "2"), unsettled), "its own renewal, unsettled")
	assert.True(t, startsReconcile(member("n", t0, "1"), member("n", later, "2"), within, within, own, settled),
		"a member's renewal half a lease duration after the version before it")
	assert.True(t, startsReconcile(leader(t0, "1"), leader(later, "2"), time.Hour, within, own, settled),
		"a leader's renewal after a silence, or a watch's stall")
	assert.False(t, steady(member("n", t0.Add(-time.Minute), "1"), member("n", later, "2"), settled),
		"a renewal long after the one before by its writer's clock (a lease first seen expired)")
	changed := member("n", later, "2")
	changed.Annotations[leases.LeavingAnnotation] = "x"
	assert.False(t, steady(member("n", t0, "1"), changed, settled), "a change of what a member tells")
	holder := member("n", later, "2")
	holder.Spec.HolderIdentity = ptr.To("o")
	assert.False(t, steady(member("n", t0, "1"), holder, settled), "another holder")
	assert.False(t, steady(nil, member("n", t0, "1"), settled), "an add")
	assert.False(t, steady(member("n", t0, "1"), nil, settled), "a delete")
	assert.False(t, steady(partition(t0, "1"), partition(later, "2"), settled), "a partition lease")
}

// deliveryRunner is a Runner of member m in group g, namespace ns, on a fake client, at t0 on a fake
// clock, for its caches' delivery of Lease events.
func deliveryRunner(t0 time.Time) (*Runner, *clocktesting.FakeClock, config.Sharding) {
	clk := clocktesting.NewFakeClock(t0)
	settings := config.DefaultSharding("g")
	settings.Namespace, settings.MemberName = "ns", "m"
	return NewRunner(RunnerOptions{Settings: settings, Client: fake.NewClientset(), Clock: clk}), clk, settings
}

// runnerMemberLease is member's lease in settings' group and namespace, created at t0.
func runnerMemberLease(settings config.Sharding, member string, t0, renewed time.Time, rv string) *coordinationv1.Lease {
	l := memberLease(settings.GroupName, member, "prober", t0, renewed, rv)
	l.Namespace = settings.Namespace
	return l
}

// The Runner's caches note when each version arrived, which the coordinator judges members by, and
// start a reconcile on every event but a steady renewal.
func TestTheRunnerNotesArrivalsAndReconcilesOnChanges(t *testing.T) {
	t0 := time.Now()
	r, clk, settings := deliveryRunner(t0)
	reconciles := 0
	delivered := r.delivered(func() { reconciles++ })
	lease := func(renewed time.Time, rv string) *coordinationv1.Lease {
		return runnerMemberLease(settings, "n", t0, renewed, rv)
	}

	first := lease(t0, "1")
	delivered(nil, first)
	assert.Equal(t, 1, reconciles, "a new member lease")
	clk.Step(settings.MemberRetryPeriod)
	renewed := lease(clk.Now(), "2")
	delivered(first, renewed)
	assert.Equal(t, 1, reconciles, "its steady renewal")
	arrived := clk.Now()
	clk.Step(time.Second)
	assert.Equal(t, arrived, r.coordinator.seenAt(renewed, clk.Now()), "the coordinator judges it from the arrival")
	clk.Step(settings.MemberLeaseDuration/2 - 2*time.Second)
	delivered(renewed, renewed) // a relist shows the same version again
	assert.Equal(t, arrived, r.coordinator.seenAt(renewed, clk.Now()), "a relist does not move the arrival")
	clk.Step(time.Second)
	delivered(renewed, lease(arrived.Add(2*time.Second), "3"))
	assert.Equal(t, 2, reconciles, "a renewal after a silence, however soon after a relist")
}

// This member's own steady renewal starts a reconcile while one runs, even when the last left it
// settled: the running one may have read the view before that renewal, and after a fence or with a
// stale view it is what the member waits for. Between reconciles it starts none.
func TestTheRunnersOwnRenewalStartsAReconcileWhileOneRuns(t *testing.T) {
	t0 := time.Now()
	r, clk, settings := deliveryRunner(t0)
	r.coordinator.ready.Store(true)
	r.coordinator.held[0] = &heldPartition{}
	require.True(t, r.coordinator.settled())
	reconciles := 0
	delivered := r.delivered(func() { reconciles++ })
	own := func(renewed time.Time, rv string) *coordinationv1.Lease {
		return runnerMemberLease(settings, "m", t0, renewed, rv)
	}

	first := own(t0, "1")
	delivered(nil, first)
	require.Equal(t, 1, reconciles, "its lease appears")
	clk.Step(settings.MemberRetryPeriod)
	second := own(clk.Now(), "2")
	delivered(first, second)
	assert.Equal(t, 1, reconciles, "a steady renewal while settled and between reconciles")
	r.reconciling.Store(clk.Now().UnixNano())
	clk.Step(settings.MemberRetryPeriod)
	delivered(second, own(clk.Now(), "3"))
	assert.Equal(t, 2, reconciles, "a steady renewal while a reconcile runs")
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
