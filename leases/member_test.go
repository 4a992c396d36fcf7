package leases_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newMember(store leases.Store, clk *clocktesting.FakeClock) *leases.Member {
	return &leases.Member{Store: store, Group: "dwd", Name: "dwd-0", Incarnation: "inc-1",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, Clock: clk}
}

func TestMemberRenewAndFence(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	assert.True(t, m.Fenced(t0), "fenced until the first renewal")

	require.NoError(t, m.Renew(ctx, t0))
	l, err := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	assert.Equal(t, "dwd-0", leases.Holder(l))
	assert.Equal(t, int32(15), *l.Spec.LeaseDurationSeconds)
	assert.Equal(t, map[string]string{leases.GroupLabel: "dwd", leases.KindLabel: leases.KindMember}, l.Labels)
	assert.Equal(t, "inc-1", leases.Incarnation(l))
	assert.False(t, m.Fenced(t0.Add(10*time.Second-time.Nanosecond)))
	assert.True(t, m.Fenced(t0.Add(10*time.Second)), "fenced exactly at the renew deadline")

	require.NoError(t, m.Renew(ctx, t0.Add(5*time.Second)))
	assert.Equal(t, t0.Add(15*time.Second), m.FenceAt())
	renewed, err := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	assert.NotEqual(t, l.ResourceVersion, renewed.ResourceVersion, "a renewal is visible to the others")
}

func TestMemberRenewAfterForeignWrite(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	// A previous incarnation, or a person, changed the lease: the next renewal reads it afresh.
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	l.Spec.HolderIdentity = ptr.To("someone-else")
	_, err := store.Update(ctx, l)
	require.NoError(t, err)

	require.NoError(t, m.Renew(ctx, t0.Add(2*time.Second)))
	assert.Equal(t, "dwd-0", store.Holder("dwd-member-dwd-0"))
}

func TestMemberRecreatesADeletedLease(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	store.Delete("dwd-member-dwd-0")
	require.NoError(t, m.Renew(ctx, t0.Add(2*time.Second)))
	assert.Equal(t, "dwd-0", store.Holder("dwd-member-dwd-0"))
}

func TestMemberYieldsToANewerIncarnation(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	old := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, old.Renew(ctx, t0))
	// A replacement process under the same name takes the lease over from its predecessor...
	replacement := newMember(store, clocktesting.NewFakeClock(t0))
	replacement.Incarnation = "inc-2"
	require.NoError(t, replacement.Renew(ctx, t0.Add(time.Second)))
	// ...and the old one, still running somewhere, stops instead of fighting for it.
	err := old.Renew(ctx, t0.Add(2*time.Second))
	require.ErrorIs(t, err, leases.ErrIdentityTaken)
	assert.True(t, old.Fenced(t0.Add(2*time.Second)))
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.Equal(t, "inc-2", leases.Incarnation(l))
}

func TestMemberRelease(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Release(ctx, t0), "releasing a lease never taken is a no-op")
	require.NoError(t, m.Renew(ctx, t0))
	require.NoError(t, m.Release(ctx, t0.Add(time.Second)))
	assert.Equal(t, "", store.Holder("dwd-member-dwd-0"))
	assert.True(t, m.Fenced(t0.Add(time.Second)), "a released member must not act")
}

// flakyStore fails every call while down is set.
type flakyStore struct {
	leases.Store
	down atomic.Bool
}

var errDown = errors.New("API server unreachable")

func (s *flakyStore) Get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.Get(ctx, name)
}

func (s *flakyStore) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.Update(ctx, l)
}

func TestMemberRunFencesAtTheRenewDeadline(t *testing.T) {
	store := &flakyStore{Store: leasestest.NewStore()}
	clk := clocktesting.NewFakeClock(t0)
	m := newMember(store, clk)
	var fences, failures atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { m.Run(ctx, func() { fences.Add(1) }, func(error) { failures.Add(1) }) })
	defer func() { cancel(); wg.Wait() }()

	// step waits until Run sleeps on the fake clock, then moves the clock on by d.
	step := func(d time.Duration) {
		require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
		clk.Step(d)
	}
	step(0)
	assert.False(t, m.Fenced(clk.Now()), "the first renewal takes the lease")
	store.down.Store(true)
	for range 4 {
		step(2 * time.Second) // t0+8s: the last successful renewal was sent at t0
	}
	assert.Equal(t, int32(0), fences.Load())
	step(2 * time.Second) // t0+10s: the renew deadline
	require.Eventually(t, func() bool { return fences.Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, failures.Load(), int32(4))

	store.down.Store(false)
	step(2 * time.Second)
	require.Eventually(t, func() bool { return !m.Fenced(clk.Now()) }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int32(1), fences.Load(), "one fence per loss of the lease")
}

func TestPartitionCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	a, err := leases.Acquire(ctx, store, "dwd", 3, nil, "dwd-0", "inc-a", t0)
	require.NoError(t, err)
	assert.Equal(t, "dwd-partition-3", a.Name)
	assert.Equal(t, "dwd-0", leases.Holder(a))
	assert.Equal(t, "inc-a", leases.Incarnation(a))
	assert.Nil(t, a.Spec.LeaseDurationSeconds, "partition leases are never renewed periodically")

	_, err = leases.Acquire(ctx, store, "dwd", 3, nil, "dwd-1", "inc-b", t0)
	assert.True(t, apierrors.IsAlreadyExists(err), "a second creator loses")

	handover := map[string]string{leases.HandoverAnnotationPrefix + "weeder": `[{"ns":"a"}]`}
	released, err := leases.Release(ctx, store, a, handover, t0.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, "", leases.Holder(released))
	assert.Equal(t, handover, leases.Handover(released), "the state travels in the release's own write")
	at, ok := leases.ReleasedAt(released)
	assert.True(t, ok)
	assert.Equal(t, t0.Add(time.Second), at)

	_, err = leases.Acquire(ctx, store, "dwd", 3, a, "dwd-1", "inc-b", t0)
	assert.True(t, apierrors.IsConflict(err), "a stale copy cannot be swapped")
	b, err := leases.Acquire(ctx, store, "dwd", 3, released, "dwd-1", "inc-b", t0.Add(2*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "dwd-1", leases.Holder(b))
	_, ok = leases.ReleasedAt(b)
	assert.False(t, ok)
	assert.Empty(t, leases.Handover(b), "the next holder's acquire consumes the handover")
	assert.Equal(t, int32(0), *b.Spec.LeaseTransitions, "taking a free lease is not a transition")

	c, err := leases.Acquire(ctx, store, "dwd", 3, b, "dwd-2", "inc-c", t0.Add(3*time.Second))
	require.NoError(t, err)
	assert.Equal(t, int32(1), *c.Spec.LeaseTransitions)
}
