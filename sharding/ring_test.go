package sharding

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/buraksezer/consistent"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRingRejectsInvalidConfigs(t *testing.T) {
	valid := RingConfig{PartitionCount: 7, ReplicationFactor: 3, LoadBound: 1.1}
	with := func(change func(*RingConfig)) RingConfig {
		cfg := valid
		change(&cfg)
		return cfg
	}
	for _, tc := range []struct {
		name    string
		cfg     RingConfig
		members []string
		wantErr string
	}{
		{"zero config", RingConfig{}, []string{"dwd-0"}, "partition count must be at least 1"},
		{"negative partition count", with(func(c *RingConfig) { c.PartitionCount = -1 }), nil, "partition count"},
		{"zero replication factor", with(func(c *RingConfig) { c.ReplicationFactor = 0 }), []string{"a"}, "replication factor"},
		{"negative replication factor", with(func(c *RingConfig) { c.ReplicationFactor = -5 }), nil, "replication factor"},
		{"zero load bound", with(func(c *RingConfig) { c.LoadBound = 0 }), []string{"a"}, "load bound"},
		{"load bound below 1", with(func(c *RingConfig) { c.LoadBound = 0.99 }), []string{"a", "b"}, "load bound"},
		{"negative load bound", with(func(c *RingConfig) { c.LoadBound = -1.5 }), []string{"a"}, "load bound"},
		{"NaN load bound", with(func(c *RingConfig) { c.LoadBound = math.NaN() }), []string{"a"}, "load bound"},
		{"infinite load bound", with(func(c *RingConfig) { c.LoadBound = math.Inf(1) }), []string{"a"}, "load bound"},
		{"empty member name", valid, []string{"dwd-0", ""}, "empty name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r *Ring
			var err error
			require.NotPanics(t, func() { r, err = NewRing(tc.members, tc.cfg) })
			require.ErrorContains(t, err, tc.wantErr)
			assert.Nil(t, r)
		})
	}
}

func TestNewRingReportsEveryConfigProblem(t *testing.T) {
	_, err := NewRing(nil, RingConfig{LoadBound: math.NaN()})
	require.Error(t, err)
	for _, want := range []string{"partition count", "replication factor", "load bound"} {
		assert.ErrorContains(t, err, want)
	}
}

func TestDistributeTurnsALibraryPanicIntoAnError(t *testing.T) {
	// A load bound below 1 leaves no room for every partition; NewRing rejects it, so call the
	// library wrapper directly to see its panic recovered.
	owners, err := distribute([]string{"a", "b"}, RingConfig{PartitionCount: 10, ReplicationFactor: 1, LoadBound: 0.5})
	require.ErrorContains(t, err, "github.com/buraksezer/consistent panicked")
	assert.ErrorContains(t, err, "not enough room")
	assert.Nil(t, owners)
}

// TestNewRingNeverFailsForValidConfigs shows that consistent's "not enough room" panic cannot happen for
// a valid config: every member on the ring is visited by the library's walk, and with LoadBound >= 1
// the capacity members × ceil(LoadBound × P / members) is at least P. The replication factor only
// decides which member gets a partition, so the sweep over 1 to 100 members uses 1 point per member
// (fast), and the default replication factor is swept for realistic groups of 1 to 12 members.
func TestNewRingNeverFailsForValidConfigs(t *testing.T) {
	for _, names := range []struct {
		kind string
		of   func(n int) []string
	}{
		{"StatefulSet names", statefulSetNames},
		{"random names", randomNameSets(rand.New(rand.NewPCG(7, 11)))},
	} {
		for _, p := range []int{1, 7, 271, DefaultPartitionCount} {
			for _, load := range []float64{1.0, 1.01, DefaultLoadBound, 1.25} {
				sweeps := []struct{ rf, maxMembers int }{{1, 100}, {DefaultReplicationFactor, 12}}
				for _, s := range sweeps {
					cfg := RingConfig{PartitionCount: p, ReplicationFactor: s.rf, LoadBound: load}
					t.Run(fmt.Sprintf("%s P=%d RF=%d L=%v", names.kind, p, s.rf, load), func(t *testing.T) {
						t.Parallel()
						for n := 1; n <= s.maxMembers; n++ {
							assertServes(t, names.of(n), cfg)
						}
					})
				}
			}
		}
	}
}

// randomNameSets draws, for every n up to 100, n distinct random pod-like names, and returns them by n.
func randomNameSets(rng *rand.Rand) func(n int) []string {
	sets := make([][]string, 101)
	for n := range sets {
		seen := map[string]bool{}
		for len(seen) < n {
			seen[dnsLabel(rng, 1, 63)] = true
		}
		sets[n] = slices.Collect(maps.Keys(seen))
	}
	return func(n int) []string { return sets[n] }
}

// assertServes builds the ring and checks that every partition has an owner within the load bound.
func assertServes(t *testing.T, members []string, cfg RingConfig) {
	t.Helper()
	var r *Ring
	var err error
	require.NotPanics(t, func() { r, err = NewRing(members, cfg) }, "%d members", len(members))
	require.NoError(t, err, "%d members", len(members))
	limit := int(math.Ceil(float64(cfg.PartitionCount) / float64(len(members)) * cfg.LoadBound))
	loads := map[string]int{}
	for p, owner := range r.Assignment() {
		require.NotEmpty(t, owner, "partition %d of %d members", p, len(members))
		loads[owner]++
	}
	for m, load := range loads {
		require.LessOrEqual(t, load, limit, "member %s of %d", m, len(members))
	}
}

func TestRingIgnoresMemberOrderAndDuplicates(t *testing.T) {
	cfg := DefaultRingConfig()
	want, err := NewRing([]string{"dwd-0", "dwd-1", "dwd-2"}, cfg)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		members []string
	}{
		{"reversed", []string{"dwd-2", "dwd-1", "dwd-0"}},
		{"shuffled with duplicates", []string{"dwd-1", "dwd-2", "dwd-1", "dwd-0", "dwd-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewRing(tc.members, cfg)
			require.NoError(t, err)
			assert.Equal(t, want.Members(), got.Members())
			assert.Equal(t, want.Assignment(), got.Assignment())
		})
	}
}

func TestRingAgreesWithTheLibrary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []string
		cfg     RingConfig
	}{
		{"defaults, 3 members", statefulSetNames(3), DefaultRingConfig()},
		{"library defaults, 5 members", statefulSetNames(5), RingConfig{271, 20, 1.25, ""}},
		{"one partition", []string{"x", "y"}, RingConfig{1, 2, 1, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRing(tc.members, tc.cfg)
			require.NoError(t, err)
			lib := consistent.New(ringMembers(tc.members), consistent.Config{Hasher: xxhasher{},
				PartitionCount: tc.cfg.PartitionCount, ReplicationFactor: tc.cfg.ReplicationFactor, Load: tc.cfg.LoadBound})
			for p := range tc.cfg.PartitionCount {
				assert.Equal(t, lib.GetPartitionOwner(p).String(), r.Owner(p), "partition %d", p)
			}
		})
	}
}

func TestPartitionIsFindPartitionIDAndIndependentOfMembers(t *testing.T) {
	namespaces := append(shootNamespaces(tableSeed, 20, 10), "", "garden", "shoot--a--b")
	for _, p := range []int{1, 7, 271, DefaultPartitionCount, 4099} {
		t.Run(fmt.Sprintf("P=%d", p), func(t *testing.T) {
			cfg := RingConfig{PartitionCount: p, ReplicationFactor: 3, LoadBound: 1.1, PartitionFunction: PartitionXXHashMod}
			empty, err := NewRing(nil, cfg)
			require.NoError(t, err)
			full, err := NewRing(statefulSetNames(4), cfg)
			require.NoError(t, err)
			lib := consistent.New(nil, consistent.Config{Hasher: xxhasher{}, PartitionCount: p, ReplicationFactor: 3, Load: 1.1})
			for _, ns := range namespaces {
				want := lib.FindPartitionID([]byte(ns))
				assert.Equal(t, want, Partitions{Function: PartitionXXHashMod, Count: p}.Of(ns), ns)
				assert.Equal(t, want, empty.Partition(ns), ns)
				assert.Equal(t, want, full.Partition(ns), ns)
			}
		})
	}
}

func TestPartitionOfWithoutPartitions(t *testing.T) {
	for _, p := range []int{0, -1} {
		t.Run(fmt.Sprintf("P=%d", p), func(t *testing.T) {
			for _, f := range []string{PartitionFNVRange, PartitionXXHashMod, ""} {
				assert.Equal(t, -1, Partitions{Function: f, Count: p}.Of("shoot--a--b"))
			}
		})
	}
}

func TestRingOwner(t *testing.T) {
	cfg := RingConfig{PartitionCount: 7, ReplicationFactor: 5, LoadBound: 1.25}
	empty, err := NewRing(nil, cfg)
	require.NoError(t, err)
	one, err := NewRing([]string{"dwd-0"}, cfg)
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		ring      *Ring
		partition int
		want      string
	}{
		{"no members", empty, 0, ""},
		{"no members, last partition", empty, 6, ""},
		{"first partition", one, 0, "dwd-0"},
		{"last partition", one, 6, "dwd-0"},
		{"negative partition", one, -1, ""},
		{"partition past the end", one, 7, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.ring.Owner(tc.partition))
		})
	}
}

func TestRingMembersAndPartitionsOf(t *testing.T) {
	r, err := NewRing([]string{"dwd-2", "dwd-10", "dwd-0", "dwd-1"}, DefaultRingConfig())
	require.NoError(t, err)
	members := r.Members()
	assert.Equal(t, []string{"dwd-0", "dwd-1", "dwd-10", "dwd-2"}, members)

	seen := make([]int, DefaultPartitionCount)
	for _, m := range members {
		t.Run(m, func(t *testing.T) {
			parts := r.PartitionsOf(m)
			assert.NotEmpty(t, parts)
			assert.True(t, slices.IsSorted(parts))
			for _, p := range parts {
				assert.Equal(t, m, r.Owner(p))
				seen[p]++
			}
		})
	}
	assert.Equal(t, slices.Repeat([]int{1}, DefaultPartitionCount), seen, "every partition has exactly one owner")
	assert.Empty(t, r.PartitionsOf("dwd-3"))
	assert.Empty(t, r.PartitionsOf(""))
}

func TestRingWithoutMembers(t *testing.T) {
	r, err := NewRing(nil, DefaultRingConfig())
	require.NoError(t, err)
	assert.Empty(t, r.Members())
	assert.Empty(t, r.PartitionsOf(""))
	assert.Equal(t, make([]string, DefaultPartitionCount), r.Assignment())
	assert.Equal(t, DefaultPartitionCount, r.PartitionCount())
}

func TestRingIsImmutable(t *testing.T) {
	r, err := NewRing([]string{"dwd-0", "dwd-1"}, RingConfig{PartitionCount: 7, ReplicationFactor: 5, LoadBound: 1.25})
	require.NoError(t, err)
	members, assignment := r.Members(), r.Assignment()

	r.Members()[0] = "changed"
	r.Assignment()[0] = "changed"

	assert.Equal(t, members, r.Members())
	assert.Equal(t, assignment, r.Assignment())
}

func TestRingIsSafeForConcurrentUse(t *testing.T) {
	r, err := NewRing(statefulSetNames(3), DefaultRingConfig())
	require.NoError(t, err)
	want := r.Assignment()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for p := range want {
				assert.Equal(t, want[p], r.Owner(p))
			}
			assert.Equal(t, statefulSetNames(3), r.Members())
			assert.NotEmpty(t, r.PartitionsOf(fmt.Sprintf("dwd-%d", i%3)))
			assert.Equal(t, Partitions{Count: DefaultPartitionCount}.Of("shoot--p--s"), r.Partition("shoot--p--s"))
		})
	}
	wg.Wait()
}
