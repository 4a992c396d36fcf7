package sharding

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// switchLiveness is a member lease a test fences and unfences at will. Unless continuousSince is set,
// it has never been held continuously: no partition resumes without a write.
type switchLiveness struct {
	fenced          atomic.Bool
	continuousSince atomic.Pointer[time.Time]
	// renewalShown, when set, is SentAt's answer for every version: when the renewal the cache shows
	// was sent.
	renewalShown atomic.Pointer[time.Time]
}

func (l *switchLiveness) ContinuousSince() time.Time {
	if since := l.continuousSince.Load(); since != nil {
		return *since
	}
	return farFuture
}

func (neverFenced) ContinuousSince() time.Time { return farFuture }

// farFuture is a ContinuousSince that no partition's write comes after.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

func (l *switchLiveness) Fenced(time.Time) bool { return l.fenced.Load() }

func (l *switchLiveness) Outage() (time.Time, time.Time) { return time.Time{}, time.Time{} }

func (l *switchLiveness) ViewStale(string, time.Time, time.Duration) bool { return false }

func (l *switchLiveness) SentAt(string) (time.Time, bool) {
	if at := l.renewalShown.Load(); at != nil {
		return *at, true
	}
	return time.Time{}, false
}

func (neverFenced) SentAt(string) (time.Time, bool) { return time.Time{}, false }

func (l *switchLiveness) PredecessorFencedBy() time.Time { return time.Time{} }

func (neverFenced) PredecessorFencedBy() time.Time { return time.Time{} }

func (l *switchLiveness) FenceAt() time.Time {
	if l.fenced.Load() {
		return time.Time{}
	}
	return time.Now().Add(time.Hour)
}

// slowReplies plays writes whose replies arrive only after something else happened: hook runs
// between the write and its reply.
type slowReplies struct {
	*leasestest.Store
	hook func()
}

func (s slowReplies) Create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out, err := s.Store.Create(ctx, l)
	s.hook()
	return out, err
}

func TestNoWorkStartsOnAReplySentBeforeAFence(t *testing.T) {
	liveness := &switchLiveness{}
	var c *Coordinator
	fenced := false
	store := slowReplies{Store: leasestest.NewStore(), hook: func() {
		if !fenced {
			// The member lease loop fences the replica while the first acquire is in flight, and a
			// renewal succeeds again before its reply arrives.
			fenced = true
			c.Fence()
		}
	}}
	started := 0
	c = NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
		Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
		RetryPeriod: 2 * time.Second, WriteConcurrency: 1,
		Store: store, Lister: store.Store, Liveness: liveness, Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard(), Handlers: []PartitionHandler{countingHandler{&started}}})

	_, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Empty(t, c.Held(), "writes sent before the fence start no work")
	assert.Zero(t, started)

	_, err = c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Len(t, c.Held(), 7, "the next reconcile confirms the partitions by fresh writes and starts them")
	assert.Equal(t, 7, started)
}

type countingHandler struct{ started *int }

func (h countingHandler) Acquired(context.Context, int, Takeover) { *h.started++ }
func (h countingHandler) Released(int)                            {}

func TestLeavingReplicaOwnsNothingWhileItsPartitionsStop(t *testing.T) {
	store := leasestest.NewStore()
	var c *Coordinator
	ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
	// One namespace in every partition: with a write concurrency of four for seven partitions, at
	// least three are still held at the first release. (Names that differ only at their end, ns-0 … ns-49, fall
	// into two partitions of FNV-1a ranges, and both could stop before any release looked.)
	var namespaces []string
	for i, seen := 0, map[int]bool{}; len(seen) < ring.PartitionCount; i++ {
		ns := fmt.Sprintf("shoot--%x--s", uint64(i)*0x9e3779b97f4a7c15)
		if p := ring.Partitions().Of(ns); !seen[p] {
			seen[p] = true
			namespaces = append(namespaces, ns)
		}
	}
	handler := &ownershipProbe{namespaces: namespaces, owns: func(ns string) bool { return c.Owns(ns) }, held: func(p int) bool { return c.Holds(p) }, partition: func(ns string) int { return c.Partition(ns) }}
	c = NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
		Ring: ring, LeaseDuration: 15 * time.Second,
		RetryPeriod: 2 * time.Second, WriteConcurrency: 4,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard(), Handlers: []PartitionHandler{handler}})
	_, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	require.Len(t, c.Held(), 7)
	require.True(t, c.Owns(namespaces[0]))

	_, err = c.Leave(context.Background(), false)
	require.NoError(t, err)
	assert.Equal(t, 7, handler.released)
	assert.Positive(t, handler.checked, "namespaces of partitions still held were looked at")
	assert.Zero(t, handler.ownedWhileLeaving, "no namespace is owned once the leave has begun")
	assert.Empty(t, c.Held())
}

// ownershipProbe asks, as each partition is released, whether the namespaces of the partitions
// still held count as owned.
type ownershipProbe struct {
	mu                                   sync.Mutex
	namespaces                           []string
	owns                                 func(string) bool
	held                                 func(int) bool
	partition                            func(string) int
	released, checked, ownedWhileLeaving int
}

func (h *ownershipProbe) Acquired(context.Context, int, Takeover) {}

func (h *ownershipProbe) Released(int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released++
	for _, ns := range h.namespaces {
		if !h.held(h.partition(ns)) {
			continue
		}
		h.checked++
		if h.owns(ns) {
			h.ownedWhileLeaving++
		}
	}
}

func TestShootsOwnedIsRecountedOnlyWhenHeldPartitionsChangeOrPeriodically(t *testing.T) {
	lists := 0
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(time.Now())
	c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
		Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
		RetryPeriod: 2 * time.Second, WriteConcurrency: 1,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard(),
		Namespaces: func(context.Context) []string { lists++; return []string{"ns-0", "ns-1", "ns-2"} }})
	reconcile := func() {
		t.Helper()
		_, err := c.Reconcile(context.Background())
		require.NoError(t, err)
	}

	reconcile()
	require.Len(t, c.Held(), 7)
	assert.Equal(t, 1, lists, "counted once the partitions were acquired")
	reconcile()
	clk.Step(shootsOwnedPeriod - time.Second)
	reconcile()
	assert.Equal(t, 1, lists, "nothing changed: not counted again")
	clk.Step(time.Second)
	reconcile()
	assert.Equal(t, 2, lists, "counted again after the period")
	c.Fence()
	reconcile()
	assert.Equal(t, 3, lists, "counted again once the held partitions changed")
}

// stateHandler hands over state for every partition under key; advisory makes it an
// AdvisoryStateHandler.
type stateHandler struct {
	key string
}

func (stateHandler) Acquired(context.Context, int, Takeover) {}
func (stateHandler) Released(int)                            {}
func (h stateHandler) HandoverState(int) (string, string)    { return h.key, "state" }

type advisoryHandler struct{ stateHandler }

func (h advisoryHandler) AdvisoryStateKey() string { return h.key }

func TestLeaveWritesNoPartitionLeaseForAdvisoryStateAlone(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handlers   []PartitionHandler
		wantWrites int
	}{
		{"advisory state only: the others take the partitions after the member lease says it left", []PartitionHandler{advisoryHandler{stateHandler{"a"}}}, 0},
		{"essential state: every partition is released with it", []PartitionHandler{advisoryHandler{stateHandler{"a"}}, stateHandler{"b"}}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := leasestest.NewStore()
			c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
				Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
				RetryPeriod: 2 * time.Second, WriteConcurrency: 1,
				Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard(), Handlers: tc.handlers})
			_, err := c.Reconcile(context.Background())
			require.NoError(t, err)
			require.Len(t, c.Held(), 7)
			before := len(store.Events(0))
			lost, err := c.Leave(context.Background(), false)
			require.NoError(t, err)
			assert.False(t, lost)
			assert.Equal(t, tc.wantWrites, len(store.Events(before)))
		})
	}
}

// TestALeaveHandsOverTheStateOfPartitionsAFenceStopped: a member fenced (its work stopped, its
// partition leases still naming it) and then stopped hands their state over as it does for the
// partitions it holds; otherwise the next holders would take them as a clean handover without it
// (docs/sharding.md, "Handover state survives a failed release").
func TestALeaveHandsOverTheStateOfPartitionsAFenceStopped(t *testing.T) {
	key := leases.HandoverAnnotationPrefix + "windows"
	for _, tc := range []struct {
		name        string
		leave       func(c *Coordinator) (bool, error)
		reservedFor string
	}{
		{"departing", func(c *Coordinator) (bool, error) { return c.Leave(context.Background(), false) }, ""},
		{"returning", func(c *Coordinator) (bool, error) { return c.Leave(context.Background(), true) }, "m"},
		{"for good", func(c *Coordinator) (bool, error) { return c.LeaveForGood(context.Background()) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := leasestest.NewStore()
			c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
				Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
				RetryPeriod: 2 * time.Second, WriteConcurrency: 1,
				Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard(), Handlers: []PartitionHandler{stateHandler{key}}})
			_, err := c.Reconcile(context.Background())
			require.NoError(t, err)
			require.Len(t, c.Held(), 7)
			c.Fence()
			require.Empty(t, c.Held())

			lost, err := tc.leave(c)
			require.NoError(t, err)
			assert.False(t, lost)
			for p := range 7 {
				l, err := store.Get(context.Background(), leases.PartitionLeaseName("g", p))
				require.NoError(t, err)
				assert.Empty(t, leases.Holder(l), "partition %d is released", p)
				assert.Equal(t, map[string]string{key: "state"}, leases.Handover(l), "partition %d carries its state", p)
				assert.Equal(t, tc.reservedFor, leases.ReservedFor(l), "partition %d", p)
			}
		})
	}
}

// TestAReleaseIsNotSentAgainOnTheCopyItReplaced: until the cache shows a release, a reconcile sees
// the lease still naming this member; sending the release again on that copy could only fail its
// precondition (docs/sharding.md, "Release to nobody").
func TestAReleaseIsNotSentAgainOnTheCopyItReplaced(t *testing.T) {
	store := leasestest.NewStore()
	c := NewCoordinator(Config{Group: "p3", Member: "m", Incarnation: "i",
		Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
		RetryPeriod: 2 * time.Second, WriteConcurrency: 1,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard()})
	_, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	stale, err := store.Get(context.Background(), leases.PartitionLeaseName("p3", 3))
	require.NoError(t, err)
	require.Equal(t, "m", leases.Holder(stale))

	require.NoError(t, c.release(context.Background(), 3, stale, ""))
	writes := len(store.Events(0))
	require.NoError(t, c.release(context.Background(), 3, stale, ""), "the copy the cache still shows")
	assert.Len(t, store.Events(0), writes, "no second release on the copy the first replaced")
	assert.Equal(t, 0.0, readMetric(t, partitionWrites.WithLabelValues("p3", "m", "release", "conflict")))

	fresh, err := store.Get(context.Background(), leases.PartitionLeaseName("p3", 3))
	require.NoError(t, err)
	assert.Empty(t, leases.Holder(fresh), "released")
}

func TestAFencedPartitionResumesWithoutAWriteOnlyWhenTheMemberLeaseWasHeldContinuously(t *testing.T) {
	for _, tc := range []struct {
		name string
		// continuousFrom is ContinuousSince, relative to when the partitions were written.
		continuousFrom time.Duration
		// touched is a partition whose lease someone else writes while the member is fenced.
		touched int
		writes  int
	}{
		{name: "held continuously", continuousFrom: -time.Second, touched: -1, writes: 0},
		{name: "a renewal answered too late after the writes", continuousFrom: time.Second, touched: -1, writes: 7},
		{name: "held continuously, one lease written by someone", continuousFrom: -time.Second, touched: 3, writes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := leasestest.NewStore()
			clk := clocktesting.NewFakeClock(time.Now())
			liveness := &switchLiveness{}
			var takeovers []Takeover
			c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
				Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
				RetryPeriod: 2 * time.Second, WriteConcurrency: 1,
				WorkContext: ctx, Store: store, Lister: store, Liveness: liveness, Clock: clk, Log: logr.Discard(), Handlers: []PartitionHandler{recordingHandler{&takeovers}}})
			own := &leases.Member{Store: store, Group: "g", Name: "m", Incarnation: "i", LeaseDuration: 15 * time.Second,
				RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, Clock: clk}
			require.NoError(t, own.Renew(ctx, clk.Now()), "the member lease, for the cache to show")
			_, err := c.Reconcile(ctx)
			require.NoError(t, err)
			require.Len(t, c.Held(), 7)
			since := clk.Now().Add(tc.continuousFrom)
			liveness.continuousSince.Store(&since)

			liveness.fenced.Store(true)
			c.Fence()
			require.Empty(t, c.Held())
			if tc.touched >= 0 {
				l, err := store.Get(ctx, leases.PartitionLeaseName("g", tc.touched))
				require.NoError(t, err)
				l.Annotations["someone"] = "wrote" // holder and incarnation stay
				_, err = store.Update(ctx, l)
				require.NoError(t, err)
			}
			liveness.fenced.Store(false)
			clk.Step(3 * time.Second)
			before := len(store.Events(0))
			takeovers = nil
			if tc.writes == 0 {
				_, err = c.Reconcile(ctx)
				require.NoError(t, err)
				assert.Empty(t, c.Held(), "the cache shows no renewal sent after the fence yet: nothing resumes")
				assert.Empty(t, store.Events(before))
			}
			renewed := clk.Now()
			liveness.renewalShown.Store(&renewed)
			_, err = c.Reconcile(ctx)
			require.NoError(t, err)

			assert.Len(t, c.Held(), 7)
			assert.Len(t, store.Events(before), tc.writes, "partition lease writes of the resume")
			resumed := 0
			for _, to := range takeovers {
				if to.Cause == Resume {
					resumed++
				}
			}
			assert.Equal(t, 7, resumed, "each a resume, with a write or without")
		})
	}
}

// recordingHandler records every takeover it is given.
type recordingHandler struct{ takeovers *[]Takeover }

func (h recordingHandler) Acquired(_ context.Context, _ int, to Takeover) {
	*h.takeovers = append(*h.takeovers, to)
}

func (recordingHandler) Released(int) {}
