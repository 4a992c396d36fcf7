package auditcheck

import (
	"testing"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/audit"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// proc builds the records of one process of group g, with partitions partitions.
type proc struct {
	member string
	pid    int
}

func (p proc) rec(event string, s float64) audit.Record {
	return audit.Record{Event: event, Wall: at(s), Mono: at(s).Sub(t0), Member: p.member, Incarnation: "inc-" + p.member, Group: "g", Pid: p.pid}
}

func (p proc) start(s float64, partitions int) audit.Record {
	r := p.rec(audit.EventStart, s)
	r.Partitions, r.RenewDeadline, r.LeaseDuration = partitions, 10*time.Second, 15*time.Second
	return r
}

func (p proc) renew(s float64) audit.Record {
	r := p.rec(audit.EventRenew, s)
	r.Fence = at(s + 10)
	return r
}

func (p proc) acquire(s float64, partition int, cause string) audit.Record {
	r := p.rec(audit.EventAcquire, s)
	r.Partition, r.Cause = partition, cause
	return r
}

func (p proc) release(s float64, partition int, cause string) audit.Record {
	r := p.rec(audit.EventRelease, s)
	r.Partition, r.Cause = partition, cause
	return r
}

func (p proc) write(sent float64, namespace string, partition int) audit.Record {
	r := p.rec(audit.EventWrite, sent+0.01)
	r.Kind, r.Namespace, r.Object, r.Partition, r.Sent, r.Result = audit.KindScale, namespace, "Deployment/kcm", partition, at(sent), audit.ResultOK
	return r
}

// send is the line written before the request of write id; its write line is p.write with that id.
func (p proc) send(sent float64, namespace string, partition int, id uint64) audit.Record {
	r := p.rec(audit.EventSend, sent)
	r.ID, r.Kind, r.Namespace, r.Object, r.Partition, r.Sent = id, audit.KindScale, namespace, "Deployment/kcm", partition, at(sent)
	return r
}

var a, b = proc{"dwd-0", 100}, proc{"dwd-1", 200}

func TestCheckOverlap(t *testing.T) {
	tests := []struct {
		name     string
		records  []audit.Record
		overlaps int
	}{
		{"both renewing hold at once", []audit.Record{a.start(0, 1), a.renew(0), a.acquire(1, 0, "fresh"), a.renew(8),
			b.start(0, 1), b.renew(5), b.acquire(12, 0, "expired-holder"), b.renew(14)}, 1},
		{"a fenced holder whose fence passed is no overlap", []audit.Record{a.start(0, 1), a.renew(0), a.acquire(1, 0, "fresh"),
			b.start(0, 1), b.renew(5), b.acquire(10, 0, "expired-holder")}, 0},
		{"release before acquire is no overlap", []audit.Record{a.start(0, 1), a.renew(0), a.acquire(1, 0, "fresh"), a.release(4, 0, "handover"),
			b.start(0, 1), b.renew(3), b.acquire(4.1, 0, "handover")}, 0},
		{"another partition is no overlap", []audit.Record{a.start(0, 2), a.renew(0), a.acquire(1, 0, "fresh"),
			b.start(0, 2), b.renew(0), b.acquire(1, 1, "fresh")}, 0},
		{"the same member's earlier process still valid", []audit.Record{a.start(0, 1), a.renew(0), a.acquire(1, 0, "fresh"),
			proc{"dwd-0", 101}.start(2, 1), proc{"dwd-0", 101}.renew(2), proc{"dwd-0", 101}.acquire(3, 0, "expired-holder")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(tt.records)
			assert.Len(t, r.Overlaps, tt.overlaps)
			if tt.overlaps > 0 {
				require.Error(t, r.OK())
				assert.Contains(t, r.String(), "overlaps: 1")
			} else {
				assert.NoError(t, r.OK())
			}
		})
	}
	o := Check(tests[0].records).Overlaps[0]
	assert.Equal(t, Overlap{Group: "g", Partition: 0, A: Holder{"dwd-0", "inc-dwd-0", 100}, B: Holder{"dwd-1", "inc-dwd-1", 200},
		From: at(12), To: at(18)}, o)
}

func TestCheckWrites(t *testing.T) {
	ns := "shoot--p--s"
	p := sharding.Partitions{Function: sharding.PartitionXXHashMod, Count: 4}.Of(ns)
	base := []audit.Record{a.start(0, 4), a.renew(0), a.acquire(1, p, "fresh")}
	tests := []struct {
		name   string
		extra  []audit.Record
		reason string
	}{
		{"a holder's write", []audit.Record{a.write(2, ns, p)}, ""},
		{"a write after the fence", []audit.Record{a.write(10.5, ns, p)}, "fence"},
		{"a write after a renewal that moved the fence", []audit.Record{a.renew(8), a.write(10.5, ns, p)}, ""},
		{"a write after the release", []audit.Record{a.release(3, p, "handover"), a.write(3.5, ns, p)}, "did not hold"},
		{"a write before the acquire", []audit.Record{a.write(0.5, ns, p)}, "did not hold"},
		{"a write to another partition", []audit.Record{a.write(2, ns, (p+1)%4)}, "is in partition"},
		{"a write by a process without a start", []audit.Record{b.renew(0), b.acquire(1, p, "fresh"), b.write(2, ns, p)}, "no start record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(append(append([]audit.Record{}, base...), tt.extra...))
			assert.Equal(t, 1, r.Writes["scale/ok"])
			if tt.reason == "" {
				assert.Empty(t, r.NonHolderWrites)
				assert.NoError(t, r.OK())
				return
			}
			require.Len(t, r.NonHolderWrites, 1)
			assert.Contains(t, r.NonHolderWrites[0].Reason, tt.reason)
			assert.ErrorContains(t, r.OK(), "1 writes sent without a valid hold")
			assert.Contains(t, r.String(), "writes by a non-holder: 1")
		})
	}
}

func TestCheckLongestUnheld(t *testing.T) {
	t.Run("after a crash", func(t *testing.T) {
		// a renews at 0 and 2 and crashes; its fence passes at 12; b takes over at 17.5.
		r := Check([]audit.Record{a.start(0, 1), a.renew(0), a.acquire(0.5, 0, "fresh"), a.renew(2),
			b.start(0, 1), b.renew(1), b.renew(11), b.renew(16), b.acquire(17.5, 0, "expired-holder"), b.renew(18)})
		require.NoError(t, r.OK())
		assert.Equal(t, Unheld{Duration: 5500 * time.Millisecond, Group: "g", Partition: 0, From: at(12), To: at(17.5), Cause: audit.CauseFenceExpired}, r.LongestUnheld)
	})
	t.Run("after a handover", func(t *testing.T) {
		r := Check([]audit.Record{a.start(0, 1), a.renew(0), a.acquire(0.5, 0, "fresh"), a.release(3, 0, "handover"),
			b.start(0, 1), b.renew(1), b.acquire(3.2, 0, "handover")})
		assert.Equal(t, "handover", r.LongestUnheld.Cause)
		assert.Equal(t, 200*time.Millisecond, r.LongestUnheld.Duration.Round(time.Millisecond))
		assert.Len(t, r.Gaps, 1)
	})
	t.Run("not before the first acquire nor after the last hold", func(t *testing.T) {
		r := Check([]audit.Record{a.start(0, 1), a.renew(0), a.acquire(5, 0, "fresh"), a.release(6, 0, "leave"), a.renew(9)})
		assert.Empty(t, r.Gaps)
		assert.Zero(t, r.LongestUnheld)
		assert.Contains(t, r.String(), "longest unheld: none")
	})
	t.Run("the longest of several", func(t *testing.T) {
		r := Check([]audit.Record{a.start(0, 2), a.renew(0), a.acquire(0.5, 0, "fresh"), a.acquire(0.5, 1, "fresh"),
			a.release(1, 0, "handover"), a.release(1, 1, "handover"),
			b.start(0, 2), b.renew(0), b.acquire(1.1, 0, "handover"), b.acquire(1.7, 1, "handover")})
		assert.Equal(t, 1, r.LongestUnheld.Partition)
		assert.Len(t, r.Gaps, 2)
	})
}

func TestCheckCounts(t *testing.T) {
	r := Check([]audit.Record{a.start(0, 1), a.renew(0), a.acquire(0.5, 0, "fresh"), a.release(3, 0, "leave"),
		b.start(0, 1), b.renew(1), b.renew(3), b.acquire(3.2, 0, "handover"), b.write(4, "ns", 0)})
	assert.Equal(t, 2, r.Processes)
	assert.Equal(t, 2, r.Acquires)
	assert.Equal(t, 1, r.Releases)
	assert.Equal(t, 3, r.Renewals)
	assert.Equal(t, map[string]int{"scale/ok": 1}, r.Writes)
	assert.Contains(t, r.String(), "processes 2, acquires 2, releases 1, renewals 3")
}

// TestAWriteInFlightAtAKillIsJudged: a write is on record from its send line on, so a write sent by a
// process killed before the answer is judged too (docs/sharding.md, "Ownership audit").
func TestAWriteInFlightAtAKillIsJudged(t *testing.T) {
	ns := "shoot--p--s" // one partition: every namespace is in partition 0
	answered := b.write(6, ns, 0)
	answered.ID = 1
	r := Check([]audit.Record{a.start(0, 1), a.renew(0), a.acquire(1, 0, "fresh"), a.renew(8),
		b.start(0, 1), b.renew(5), b.send(6, ns, 0, 1), answered,
		b.send(7, ns, 0, 2)}) // b is killed with its second write in flight
	require.Len(t, r.NonHolderWrites, 2, r)
	assert.Equal(t, audit.ResultOK, r.NonHolderWrites[0].Write.Result, "the send has the result its write line gives")
	assert.Equal(t, audit.ResultUnanswered, r.NonHolderWrites[1].Write.Result, "a write without an answer is judged by its send")
	assert.Equal(t, map[string]int{"scale/ok": 1, "scale/unanswered": 1}, r.Writes, "a send and its result are one write")
}

// TestAProcessLinesAreOrderedByItsMonotonicClock: a's wall clock steps 2.5 s back after it released
// partition 0, and it takes the partition again; b takes it at 5 s. By the monotonic clock a holds it
// again when b takes it; by wall time the second acquire would fall inside the first hold and vanish.
func TestAProcessLinesAreOrderedByItsMonotonicClock(t *testing.T) {
	reacquire := a.acquire(1.5, 0, "fresh")
	reacquire.Mono = at(4).Sub(t0)
	renew := a.renew(4)
	renew.Wall, renew.Mono = at(1.5), at(4.5).Sub(t0)
	renew.Fence = at(11.5)
	r := Check([]audit.Record{a.start(0, 1), a.renew(0), a.acquire(1, 0, "fresh"), a.release(3, 0, "handover"), reacquire, renew,
		b.start(0, 1), b.renew(5), b.acquire(5, 0, "handover")})
	assert.Len(t, r.Overlaps, 1, r)
}

// inGroup is the records of p as a process of group g.
func inGroup(g string, records ...audit.Record) []audit.Record {
	for i := range records {
		records[i].Group = g
	}
	return records
}

// Each group's holds can be valid on their own while two groups act on one shoot (docs/sharding.md,
// "Ownership audit"): writes of one kind to one namespace from two groups within a fence interval
// fail.
func TestCheckWritesAcrossGroups(t *testing.T) {
	ns := "shoot--p--s"
	p := 0
	prober := inGroup("dwd-prober", a.start(0, 1), a.renew(0), a.acquire(1, p, "fresh"), a.renew(8), a.write(2, ns, p))
	tests := []struct {
		name  string
		other []audit.Record
		cross int
	}{
		{"another group writes the shoot soon after", inGroup("dependency-watchdog", b.start(0, 1), b.renew(0), b.acquire(1, p, "fresh"), b.write(5, ns, p)), 1},
		{"another group writes it after a fence interval", inGroup("dependency-watchdog", b.start(0, 1), b.renew(8), b.acquire(9, p, "fresh"), b.write(12.5, ns, p)), 0},
		{"the same group's next holder", inGroup("dwd-prober", b.start(0, 1), b.renew(3), b.acquire(3.5, p, "handover"), b.write(4, ns, p)), 0},
		{"another group writes another shoot", inGroup("dependency-watchdog", b.start(0, 1), b.renew(0), b.acquire(1, p, "fresh"), b.write(5, "shoot--p--t", 0)), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(append(append([]audit.Record{}, prober...), tt.other...))
			assert.Len(t, r.CrossGroupWrites, tt.cross)
			if tt.cross > 0 {
				assert.ErrorContains(t, r.OK(), "another group wrote within a fence interval")
				assert.Contains(t, r.String(), "writes across groups: 1")
			} else {
				assert.Empty(t, r.CrossGroupWrites)
			}
		})
	}
	// Writes of the weeder and of the prober to one shoot are no conflict.
	weeder := inGroup("dwd-weeder", b.start(0, 1), b.renew(0), b.acquire(1, p, "fresh"), b.write(3, ns, p))
	weeder[len(weeder)-1].Kind = audit.KindDelete
	assert.Empty(t, Check(append(append([]audit.Record{}, prober...), weeder...)).CrossGroupWrites)
}

// A process's start record names its partition function, and the checker maps namespaces with it; a
// file of an earlier dwd, without one, is read as xxhash64-mod-v1.
func TestCheckWritesMapsWithTheRecordedPartitionFunction(t *testing.T) {
	ns := "shoot--p--s"
	fnv := sharding.Partitions{Function: sharding.PartitionFNVRange, Count: 887}.Of(ns)
	xx := sharding.Partitions{Function: sharding.PartitionXXHashMod, Count: 887}.Of(ns)
	require.NotEqual(t, fnv, xx)
	start := a.start(0, 887)
	start.PartitionFunction = sharding.PartitionFNVRange
	r := Check([]audit.Record{start, a.renew(0), a.acquire(1, fnv, "fresh"), a.write(2, ns, fnv)})
	assert.NoError(t, r.OK())
	r = Check([]audit.Record{a.start(0, 887), a.renew(0), a.acquire(1, fnv, "fresh"), a.write(2, ns, fnv)})
	assert.Error(t, r.OK(), "without a function the file is an earlier dwd's: xxhash64-mod-v1")
}
