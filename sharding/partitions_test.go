package sharding

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// ofHash is fnv1a64-range-v1's partition of a hash.
func ofHash(h uint64, count int) int {
	hi, _ := bits.Mul64(h, uint64(count))
	return int(hi)
}

func TestEachRangePartitionIsTheContiguousRangeOfItsHashes(t *testing.T) {
	for _, count := range []int{1, 2, 3, 7, 271, DefaultPartitionCount, 4099, 10000} {
		t.Run(fmt.Sprintf("P=%d", count), func(t *testing.T) {
			p := Partitions{Function: PartitionFNVRange, Count: count}
			all := make([]bool, count)
			for i := range all {
				all[i] = true
			}
			require.Equal(t, []HashRange{{Start: 0, ToEnd: true}}, p.Ranges(all), "the whole share is one range")
			for part := 0; part < count; part++ {
				one := make([]bool, count)
				one[part] = true
				r := p.Ranges(one)
				require.Len(t, r, 1)
				// The first hash of the range is in the partition, the one before it in the previous.
				require.Equal(t, part, ofHash(r[0].Start, count), "start of %d", part)
				if part > 0 {
					require.Equal(t, part-1, ofHash(r[0].Start-1, count), "before the start of %d", part)
				}
				if !r[0].ToEnd {
					require.Equal(t, part+1, ofHash(r[0].End, count), "end of %d", part)
					require.Equal(t, part, ofHash(r[0].End-1, count), "last hash of %d", part)
				}
			}
		})
	}
}

func TestRangesMergeAdjacentPartitionsAndSelectorsNameThem(t *testing.T) {
	p := Partitions{Function: PartitionFNVRange, Count: 4}
	r := p.Ranges([]bool{true, true, false, true})
	require.Equal(t, []HashRange{{Start: 0, End: 1 << 63}, {Start: 3 << 62, ToEnd: true}}, r)
	assert.Equal(t, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || "+
		"shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')", ShardSelector(r))
	assert.Empty(t, p.Ranges(make([]bool, 4)), "an empty share has no range")
	assert.Empty(t, ShardSelector(nil))
	assert.Nil(t, Partitions{Function: PartitionXXHashMod, Count: 4}.Ranges([]bool{true, true, true, true}),
		"xxhash64-mod-v1 partitions are no hash ranges")
	assert.Nil(t, p.Ranges([]bool{true}), "a mask of another partition count")
}

func TestPartitionOfANamespaceIsOfItsFNVHash(t *testing.T) {
	namespaces := append(shootNamespaces(tableSeed, 20, 10), "", "garden", "shoot--a--b")
	for _, ns := range namespaces {
		assert.Equal(t, ofHash(FNV(ns), DefaultPartitionCount), Partitions{Count: DefaultPartitionCount}.Of(ns), ns)
	}
	assert.Equal(t, uint64(0xcbf29ce484222325), FNV(""), "the FNV-1a offset basis")
	assert.Equal(t, -1, Partitions{Function: "md5-v0", Count: 7}.Of("x"), "an unknown function maps nothing")
}

func TestSettingsNameThePartitionFunction(t *testing.T) {
	ring := DefaultRingConfig()
	assert.Contains(t, Settings(ring, nil), "partition-function="+PartitionFNVRange)
	ring.PartitionFunction = ""
	assert.Contains(t, Settings(ring, nil), "partition-function="+PartitionFNVRange, "the default, named")
	ring.PartitionFunction = PartitionXXHashMod
	assert.Contains(t, Settings(ring, nil), "partition-function="+PartitionXXHashMod)
	ring.PartitionFunction = "md5-v0"
	_, err := NewRing([]string{"a"}, ring)
	assert.ErrorContains(t, err, `partition function must be one of`)
}

// gatedCaches are caches that hold what Hold last named once warm says so.
type gatedCaches struct {
	held []bool
	warm func(p int) bool
}

func (c *gatedCaches) Hold(p []bool)   { c.held = slices.Clone(p) }
func (c *gatedCaches) Warm(p int) bool { return c.held[p] && c.warm(p) }

func TestAPartitionIsAcquiredOnlyOnceTheCachesHoldIt(t *testing.T) {
	store := leasestest.NewStore()
	warm := map[int]bool{}
	caches := &gatedCaches{warm: func(p int) bool { return warm[p] }}
	c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
		Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
		RetryPeriod: 2 * time.Second, WriteConcurrency: 4, Caches: caches,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard()})

	after, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Empty(t, c.Held(), "no partition before the caches hold it")
	assert.Equal(t, []bool{true, true, true, true, true, true, true}, caches.held, "the caches are told the share")
	assert.LessOrEqual(t, after, warmPollPeriod, "the next reconcile comes soon")
	assert.False(t, c.Ready())

	warm[2], warm[5] = true, true
	_, err = c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.ElementsMatch(t, []int{2, 5}, c.Held(), "the warm partitions only")

	for p := range 7 {
		warm[p] = true
	}
	after, err = c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Len(t, c.Held(), 7)
	assert.True(t, c.Ready())
	assert.Greater(t, after, warmPollPeriod, "nothing waits")
}

// A partition whose shoots the caches never hold is acquired after MaxWarmWait all the same: a cache
// that cannot list must not leave it without an owner.
func TestAPartitionIsAcquiredColdAfterTheLongestWait(t *testing.T) {
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(time.Now())
	caches := &gatedCaches{warm: func(p int) bool { return p != 3 }}
	c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
		Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
		RetryPeriod: 2 * time.Second, WriteConcurrency: 4, Caches: caches,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard()})
	_, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Len(t, c.Held(), 6, "all but the cold one")
	clk.Step(MaxWarmWait - time.Millisecond)
	_, err = c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.False(t, c.Holds(3), "still within the wait")
	clk.Step(time.Millisecond)
	_, err = c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.True(t, c.Holds(3), "acquired cold after the wait")
}

// A reconcile acquires at most AcquireBatch of the partitions their holders released, earliest
// release first, and asks for the next reconcile at once; partitions without a release (never held
// here, or taken from an expired holder) are not held back.
func TestAReconcileAcquiresReleasedPartitionsInBatchesEarliestReleaseFirst(t *testing.T) {
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(time.Now())
	ctx := context.Background()
	const count = 7
	// Partitions 0..4 were held by a member that left, and released in reverse order: 4 first.
	releasedLeases(t, store, count, 5, clk.Now())
	c := batchingCoordinator(store, store, clk, nil)

	after, err := c.Reconcile(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []int{5, 6, 4, 3}, c.Held(), "those never held, and the two released first")
	assert.Zero(t, after, "the next batch at once")
	assert.False(t, c.Ready())

	after, err = c.Reconcile(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []int{5, 6, 4, 3, 2, 1}, c.Held())
	assert.Zero(t, after)

	after, err = c.Reconcile(ctx)
	require.NoError(t, err)
	assert.Len(t, c.Held(), count, "the last batch is not full")
	assert.True(t, c.Ready())
	assert.Positive(t, after, "nothing left for an immediate reconcile")
}

// releasedLeases writes the leases of partitions 0..n-1 of group g as held by a member that left and
// released them in reverse order: n-1 first.
func releasedLeases(t *testing.T, store leases.Store, count, n int, at time.Time) {
	t.Helper()
	for p := range n {
		held, err := leases.Acquire(context.Background(), store, "g", count, p, nil, "gone", "old", at)
		require.NoError(t, err)
		_, err = leases.Release(context.Background(), store, held, nil, "", at.Add(time.Duration(10-p)*time.Second))
		require.NoError(t, err)
	}
}

// Partitions that waited out MaxWarmWait are acquired together, whatever the batch: one left out
// would start its wait again and stay unowned for another MaxWarmWait.
func TestPartitionsAcquiredColdAreNotHeldBackByTheBatch(t *testing.T) {
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(time.Now())
	releasedLeases(t, store, 7, 5, clk.Now())
	c := batchingCoordinator(store, store, clk, &gatedCaches{warm: func(int) bool { return false }})
	_, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	require.Empty(t, c.Held(), "nothing is warm")
	clk.Step(MaxWarmWait)
	_, err = c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Len(t, c.Held(), 7, "every partition that waited out the wait, at once")
}

// A batch that acquired nothing (its writes lost their races) does not ask for the next at once: a
// cache behind the store would have every next reconcile pick the same partitions again.
func TestABatchThatAcquiredNothingWaitsForTheNextEvent(t *testing.T) {
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(time.Now())
	releasedLeases(t, store, 7, 5, clk.Now())
	c := batchingCoordinator(losingStore{store}, store, clk, nil)
	after, err := c.Reconcile(context.Background())
	require.NoError(t, err, "a lost race is no error")
	assert.Empty(t, c.Held())
	assert.Positive(t, after)
}

// batchingCoordinator is the only member of group g over 7 partitions, acquiring released ones 2 at
// a time.
func batchingCoordinator(store leases.Store, lister Lister, clk *clocktesting.FakeClock, caches Caches) *Coordinator {
	return NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
		Ring: RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
		RetryPeriod: 2 * time.Second, WriteConcurrency: 4, AcquireBatch: 2, Caches: caches,
		Store: store, Lister: lister, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard()})
}

// losingStore loses every write's race.
type losingStore struct{ leases.Store }

func (s losingStore) Create(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return nil, apierrors.NewAlreadyExists(coordinationv1.Resource("leases"), l.Name)
}

func (s losingStore) Update(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return nil, apierrors.NewConflict(coordinationv1.Resource("leases"), l.Name, errors.New("lost"))
}
