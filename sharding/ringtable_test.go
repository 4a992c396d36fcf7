package sharding

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Goals of the defaults, see docs/ring.md.
const (
	maxBalance    = 1.10 // most shoots on one member over the mean
	maxMovedRatio = 1.25 // shoots moved by a join or leave over the ideal fraction
)

// tableMemberCounts are the group sizes the defaults are measured for.
var tableMemberCounts = []int{3, 5, 10}

// tableSeed seeds the namespaces of the table.
const tableSeed = 20240601

// shootNamespaces returns projects × perProject realistic shoot namespace names
// (shoot--<project>--<name>), the same for the same seed.
func shootNamespaces(seed uint64, projects, perProject int) []string {
	rng := rand.New(rand.NewPCG(seed, 4099))
	var namespaces []string
	seen := map[string]bool{}
	for len(namespaces) < projects*perProject {
		project := dnsLabel(rng, 3, 10)
		for range perProject {
			ns := "shoot--" + project + "--" + dnsLabel(rng, 3, 11)
			if !seen[ns] {
				seen[ns] = true
				namespaces = append(namespaces, ns)
			}
		}
	}
	return namespaces[:projects*perProject]
}

// dnsLabel returns a random lowercase name of min..max characters starting with a letter.
func dnsLabel(rng *rand.Rand, minLen, maxLen int) string {
	const letters, alnum = "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz0123456789"
	b := []byte{letters[rng.IntN(len(letters))]}
	for n := minLen + rng.IntN(maxLen-minLen+1); len(b) < n; {
		b = append(b, alnum[rng.IntN(len(alnum))])
	}
	return string(b)
}

// statefulSetNames returns dwd-0 .. dwd-(n-1).
func statefulSetNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("dwd-%d", i)
	}
	return names
}

// shootsPerPartition counts the namespaces of every partition.
func shootsPerPartition(namespaces []string, partitionCount int) []int {
	sizes := make([]int, partitionCount)
	for _, ns := range namespaces {
		sizes[Partitions{Count: partitionCount}.Of(ns)]++
	}
	return sizes
}

// change is the cost of a rebalance: moved fraction over the ideal, and partition lease writes.
type change struct {
	ratio  float64
	writes int
}

// ringRow is one line of the table: a group of n members measured against the goals.
type ringRow struct {
	members    int
	balance    float64 // most shoots on a member over the mean
	join       change  // dwd-n joins
	scaleDown  change  // the highest ordinal leaves
	crashMean  change  // mean over each member leaving in turn (writes rounded)
	crashWorst change  // worst over each member leaving in turn
}

// meetsGoals reports whether the row meets the balance and moved-fraction goals.
func (r ringRow) meetsGoals() bool {
	return r.balance <= maxBalance && r.join.ratio <= maxMovedRatio &&
		r.scaleDown.ratio <= maxMovedRatio && r.crashWorst.ratio <= maxMovedRatio
}

func (r ringRow) String() string {
	return fmt.Sprintf("%3d | %8.3f | %10.3f %6d | %16.3f %6d | %11.3f %5.3f %6d %5d",
		r.members, r.balance, r.join.ratio, r.join.writes, r.scaleDown.ratio, r.scaleDown.writes,
		r.crashMean.ratio, r.crashWorst.ratio, r.crashMean.writes, r.crashWorst.writes)
}

const ringRowHeader = "  N | max/mean | join ratio writes | scale-down ratio writes | crash ratio mean worst writes mean worst"

// ringLayouts are the assignments of a group of n members before and after every change measured.
type ringLayouts struct {
	n         int
	base      []string
	join      []string   // dwd-n joins
	scaleDown []string   // dwd-(n-1) leaves
	crashes   [][]string // dwd-i leaves, for every i
}

func layoutsOf(tb testing.TB, cfg RingConfig, n int) ringLayouts {
	names := statefulSetNames(n)
	l := ringLayouts{
		n:         n,
		base:      assignment(tb, names, cfg),
		join:      assignment(tb, statefulSetNames(n+1), cfg),
		scaleDown: assignment(tb, names[:n-1], cfg),
	}
	for i := range names {
		l.crashes = append(l.crashes, assignment(tb, slices.Delete(slices.Clone(names), i, i+1), cfg))
	}
	return l
}

func assignment(tb testing.TB, names []string, cfg RingConfig) []string {
	r, err := NewRing(names, cfg)
	require.NoError(tb, err)
	return r.Assignment()
}

// measure computes the row for the given shoots per partition.
func (l ringLayouts) measure(sizes []int) ringRow {
	row := ringRow{
		members:   l.n,
		balance:   balance(l.base, sizes, l.n),
		join:      rebalanceCost(l.base, l.join, sizes, l.n+1),
		scaleDown: rebalanceCost(l.base, l.scaleDown, sizes, l.n),
	}
	var ratioSum float64
	var writesSum int
	for _, after := range l.crashes {
		c := rebalanceCost(l.base, after, sizes, l.n)
		ratioSum += c.ratio
		writesSum += c.writes
		row.crashWorst.ratio = max(row.crashWorst.ratio, c.ratio)
		row.crashWorst.writes = max(row.crashWorst.writes, c.writes)
	}
	row.crashMean = change{ratio: ratioSum / float64(l.n), writes: (writesSum + l.n/2) / l.n}
	return row
}

// balance returns the most shoots any of the n members holds over the mean.
func balance(owners []string, sizes []int, n int) float64 {
	shoots := map[string]int{}
	total := 0
	for p, owner := range owners {
		shoots[owner] += sizes[p]
		total += sizes[p]
	}
	most := 0
	for _, s := range shoots {
		most = max(most, s)
	}
	return float64(most) * float64(n) / float64(total)
}

// rebalanceCost compares two assignments. The ideal moved fraction is 1/largerGroup: a joining member
// takes 1/(n+1) of the shoots, a leaving one hands over 1/n.
func rebalanceCost(before, after []string, sizes []int, largerGroup int) change {
	moved, total, writes := 0, 0, 0
	for p := range before {
		total += sizes[p]
		if before[p] != after[p] {
			moved += sizes[p]
			writes += 2 // release and acquire
		}
	}
	return change{ratio: float64(moved) * float64(largerGroup) / float64(total), writes: writes}
}

// measureTable computes the rows for every group size of the table.
func measureTable(tb testing.TB, cfg RingConfig, namespaces []string) []ringRow {
	sizes := shootsPerPartition(namespaces, cfg.PartitionCount)
	rows := make([]ringRow, len(tableMemberCounts))
	for i, n := range tableMemberCounts {
		rows[i] = layoutsOf(tb, cfg, n).measure(sizes)
	}
	return rows
}

func formatTable(title string, cfg RingConfig, rows []ringRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: P=%d RF=%d L=%v\n%s\n", title, cfg.PartitionCount, cfg.ReplicationFactor, cfg.LoadBound, ringRowHeader)
	for _, r := range rows {
		fmt.Fprintln(&b, r)
	}
	return b.String()
}

// TestRingTable measures the defaults against the goals (and the library defaults for comparison) on
// 5,000 shoot namespaces and groups of 3, 5 and 10 members.
func TestRingTable(t *testing.T) {
	namespaces := shootNamespaces(tableSeed, 250, 20)
	require.Len(t, namespaces, 5000)
	library := RingConfig{PartitionCount: 271, ReplicationFactor: 20, LoadBound: 1.25}
	t.Log("\n" + formatTable("library defaults", library, measureTable(t, library, namespaces)))

	rows := measureTable(t, DefaultRingConfig(), namespaces)
	t.Log("\n" + formatTable("chosen defaults", DefaultRingConfig(), rows))
	for _, r := range rows {
		t.Run(fmt.Sprintf("%d members", r.members), func(t *testing.T) {
			assert.LessOrEqual(t, r.balance, maxBalance, "balance")
			assert.LessOrEqual(t, r.join.ratio, maxMovedRatio, "join")
			assert.LessOrEqual(t, r.scaleDown.ratio, maxMovedRatio, "scale-down")
			assert.LessOrEqual(t, r.crashWorst.ratio, maxMovedRatio, "worst crash")
		})
	}
}

// TestRingScan prints the parameter scan the defaults were chosen from. Per configuration: for groups
// of 3, 5 and 10 members the balance and the moved fractions over the ideal (join, scale-down, worst
// crash) on the table's namespaces; the partition writes of a join and of a scale-down; whether the
// goals are met; on how many of scanSamples other samples of 5,000 namespaces they are met too; and for
// how many group sizes from 3 to 12 they are met on the table's namespaces. The last two show whether a
// configuration is good or merely lucky on the table. It takes a while, so it runs only with
// DWD_RING_SCAN=1.
func TestRingScan(t *testing.T) {
	if os.Getenv("DWD_RING_SCAN") != "1" {
		t.Skip("set DWD_RING_SCAN=1 to run the parameter scan")
	}
	samples := make([][]string, scanSamples+1)
	for i := range samples {
		samples[i] = shootNamespaces(tableSeed+uint64(i), 250, 20)
	}
	var b strings.Builder
	fmt.Fprintln(&b, "\n   P  RF    L | N=3 bal join down crash | N=5 bal join down crash | N=10 bal join down crash |"+
		" writes join/down N=3,5,10 | ok | samples ok | N=3..12 ok")
	for _, p := range scanPartitionCounts {
		for _, rf := range scanReplicationFactors {
			for _, l := range scanLoadBounds {
				cfg := RingConfig{PartitionCount: p, ReplicationFactor: rf, LoadBound: l}
				fmt.Fprintln(&b, scanLine(t, cfg, samples))
			}
		}
	}
	t.Log(b.String())
}

const scanSamples = 50

var (
	scanPartitionCounts    = []int{271, 521, 769, 887, 1021, 2053, 4099}
	scanReplicationFactors = []int{20, 50, 100, 200, 400}
	scanLoadBounds         = []float64{1.02, 1.05, 1.08, 1.10, 1.15, 1.25}
)

// scanLine measures a configuration on the table's namespaces (samples[0]), on the other samples, and
// for other group sizes.
func scanLine(tb testing.TB, cfg RingConfig, samples [][]string) string {
	layouts := make([]ringLayouts, len(tableMemberCounts))
	for i, n := range tableMemberCounts {
		layouts[i] = layoutsOf(tb, cfg, n)
	}
	sizes := shootsPerPartition(samples[0], cfg.PartitionCount)
	line := fmt.Sprintf("%4d %3d %4.2f", cfg.PartitionCount, cfg.ReplicationFactor, cfg.LoadBound)
	writes := ""
	for _, l := range layouts {
		r := l.measure(sizes)
		line += fmt.Sprintf(" | %4.2f %4.2f %4.2f %4.2f", r.balance, r.join.ratio, r.scaleDown.ratio, r.crashWorst.ratio)
		writes += fmt.Sprintf(" %d/%d", r.join.writes, r.scaleDown.writes)
	}
	passed := 0
	for _, ns := range samples[1:] {
		if meetsGoals(layouts, shootsPerPartition(ns, cfg.PartitionCount)) {
			passed++
		}
	}
	sizesOK := 0
	for n := 3; n <= 12; n++ {
		if layoutsOf(tb, cfg, n).measure(sizes).meetsGoals() {
			sizesOK++
		}
	}
	return fmt.Sprintf("%s |%s | %-5v | %2d/%d | %2d/10", line, writes, meetsGoals(layouts, sizes),
		passed, len(samples)-1, sizesOK)
}

// meetsGoals reports whether every group size meets the goals on the given shoots per partition.
func meetsGoals(layouts []ringLayouts, sizes []int) bool {
	for _, l := range layouts {
		if !l.measure(sizes).meetsGoals() {
			return false
		}
	}
	return true
}

// TestRingUpToThirtyMembers re-checks the defaults (and two larger partition counts) for groups of up
// to 30 members on the table's 5,000 namespaces: the shoot balance, the partition balance, the moved
// fractions and the writes; beside the balance, the floor no ring can beat: the shoots hashed straight
// to the members (a ring with one partition per shoot). It runs with DWD_RING_SCAN=1.
func TestRingUpToThirtyMembers(t *testing.T) {
	if os.Getenv("DWD_RING_SCAN") != "1" {
		t.Skip("set DWD_RING_SCAN=1 to run the parameter scan")
	}
	namespaces := shootNamespaces(tableSeed, 250, 20)
	var b strings.Builder
	fmt.Fprintln(&b, "\n   P |  N | shoots max/mean (floor) | partitions max/mean | join ratio writes | scale-down ratio writes | crash ratio mean worst writes mean worst")
	for _, p := range []int{DefaultRingConfig().PartitionCount, 2053, 4099} {
		cfg := DefaultRingConfig()
		cfg.PartitionCount = p
		sizes := shootsPerPartition(namespaces, p)
		for _, n := range []int{3, 5, 10, 15, 20, 30} {
			l := layoutsOf(t, cfg, n)
			r := l.measure(sizes)
			ones := make([]int, p)
			for i := range ones {
				ones[i] = 1
			}
			fmt.Fprintf(&b, "%4d | %2d | %8.3f (%.3f) | %8.3f | %10.3f %6d | %16.3f %6d | %11.3f %5.3f %6d %5d\n",
				p, n, r.balance, hashedBalance(namespaces, n), balance(l.base, ones, n), r.join.ratio, r.join.writes,
				r.scaleDown.ratio, r.scaleDown.writes, r.crashMean.ratio, r.crashWorst.ratio, r.crashMean.writes, r.crashWorst.writes)
		}
	}
	t.Log(b.String())
}

// hashedBalance is the most shoots on one of n members over the mean when each namespace goes to
// member xxhash(namespace) mod n: the balance of a ring with one partition per shoot.
func hashedBalance(namespaces []string, n int) float64 {
	counts := make([]int, n)
	for _, ns := range namespaces {
		counts[Partitions{Function: PartitionXXHashMod, Count: n}.Of(ns)]++
	}
	return float64(slices.Max(counts)) * float64(n) / float64(len(namespaces))
}
