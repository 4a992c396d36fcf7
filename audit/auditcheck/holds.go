package auditcheck

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/audit"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// slot is a partition of a group.
type slot struct {
	group     string
	partition int
}

// hold is a time one process validly held a slot: [from, to).
type hold struct {
	holder   Holder
	from, to time.Time
	cause    string // how it ended
}

// renewal is a renew record: from at, the process may act until fence.
type renewal struct{ at, fence time.Time }

// span is a time a process held a slot by its acquires and releases, whatever its fence.
type span struct {
	from, to time.Time // to is zero while open
	cause    string
}

// process is what the records of one process say.
type process struct {
	holder     Holder
	group      string
	partitions int // 0 when it wrote no start record
	// partitionFunction maps namespaces to partitions (the start record's).
	partitionFunction string
	// renewDeadline is how long after a renewal the process may act (its start record's).
	renewDeadline time.Duration
	renewals      []renewal
	spans         map[slot][]span
	acquires      int
	releases      int
	// last is the process's last record: holds still open end there at the latest.
	last time.Time
}

// replay sorts records, each process's in its order (see inProcessOrder), into processes.
func replay(records []audit.Record) map[Holder]*process {
	procs := map[Holder]*process{}
	for _, r := range records {
		h := holderOf(r)
		p := procs[h]
		if p == nil {
			p = &process{holder: h, group: r.Group, spans: map[slot][]span{}}
			procs[h] = p
		}
		p.add(r)
	}
	return procs
}

func (p *process) add(r audit.Record) {
	p.last = r.Wall
	s := slot{group: r.Group, partition: r.Partition}
	switch r.Event {
	case audit.EventStart:
		p.partitions, p.renewDeadline = r.Partitions, r.RenewDeadline
		// A file of a version before the partition function was recorded used xxhash64-mod-v1.
		p.partitionFunction = cmp.Or(r.PartitionFunction, sharding.PartitionXXHashMod)
	case audit.EventRenew:
		p.renewals = append(p.renewals, renewal{at: r.Wall, fence: r.Fence})
	case audit.EventAcquire:
		p.acquires++
		if open := p.open(s); open == nil {
			p.spans[s] = append(p.spans[s], span{from: r.Wall})
		}
	case audit.EventRelease:
		p.releases++
		if open := p.open(s); open != nil {
			open.to, open.cause = r.Wall, r.Cause
		}
	}
}

// open returns the open span of s, if any.
func (p *process) open(s slot) *span {
	spans := p.spans[s]
	if n := len(spans); n > 0 && spans[n-1].to.IsZero() {
		return &spans[n-1]
	}
	return nil
}

// fenced returns the times the process's renewals let it act: from each renewal until its fence or
// the next renewal, merged.
func (p *process) fenced() []hold {
	var out []hold
	for i, r := range p.renewals {
		to := r.fence
		if i+1 < len(p.renewals) && p.renewals[i+1].at.Before(to) {
			to = p.renewals[i+1].at
		}
		if !to.After(r.at) {
			continue
		}
		if n := len(out); n > 0 && !out[n-1].to.Before(r.at) {
			out[n-1].to = to
			continue
		}
		out = append(out, hold{from: r.at, to: to})
	}
	return out
}

// validHolds intersects the process's spans with the times its renewals let it act.
func (p *process) validHolds() map[slot][]hold {
	fenced := p.fenced()
	out := map[slot][]hold{}
	for s, spans := range p.spans {
		for _, sp := range spans {
			for _, f := range fenced {
				if h, ok := p.intersect(sp, f); ok {
					out[s] = append(out[s], h)
				}
			}
		}
	}
	return out
}

// intersect is the valid part of span sp within the fenced time f.
func (p *process) intersect(sp span, f hold) (hold, bool) {
	from := later(sp.from, f.from)
	to, cause := f.to, audit.CauseFenceExpired
	if !sp.to.IsZero() && !sp.to.After(to) {
		to, cause = sp.to, sp.cause
	}
	if !to.After(from) {
		return hold{}, false
	}
	return hold{holder: p.holder, from: from, to: to, cause: cause}, true
}

// judge returns why write w was not sent by a valid holder of its namespace's partition, or "".
func (p *process) judge(w audit.Record) string {
	if p == nil || p.partitions == 0 {
		return "no start record of its process gives the partition count"
	}
	want := sharding.Partitions{Function: p.partitionFunction, Count: p.partitions}.Of(w.Namespace)
	if w.Partition != want {
		return fmt.Sprintf("recorded partition %d, but namespace %s is in partition %d of %d", w.Partition, w.Namespace, want, p.partitions)
	}
	s := slot{group: w.Group, partition: want}
	for _, sp := range p.spans[s] {
		if sp.from.After(w.Sent) || (!sp.to.IsZero() && !sp.to.After(w.Sent)) {
			continue
		}
		if fence := p.fenceAt(w.Sent); fence.After(w.Sent) {
			return ""
		}
		return fmt.Sprintf("sent at or after the fence %s of the sender's last renewal", p.fenceAt(w.Sent).Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("the sender did not hold partition %d", want)
}

// deadline is the process's renew deadline; 0 for a process without a start record.
func (p *process) deadline() time.Duration {
	if p == nil {
		return 0
	}
	return p.renewDeadline
}

// fenceAt returns the fence of the latest renewal at or before t; zero when none.
func (p *process) fenceAt(t time.Time) time.Time {
	var fence time.Time
	for _, r := range p.renewals {
		if r.at.After(t) {
			break
		}
		fence = r.fence
	}
	return fence
}

// overlaps finds the times two processes validly held s at once.
func overlaps(s slot, holds []hold) []Overlap {
	holds = slices.Clone(holds)
	slices.SortFunc(holds, func(a, b hold) int { return a.from.Compare(b.from) })
	var out []Overlap
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if !b.from.Before(a.to) {
				break
			}
			if a.holder == b.holder {
				continue
			}
			out = append(out, Overlap{Group: s.group, Partition: s.partition, A: a.holder, B: b.holder, From: b.from, To: earlier(a.to, b.to)})
		}
	}
	return out
}

// gaps finds the times nobody validly held s between two holds.
func gaps(s slot, holds []hold) []Unheld {
	holds = slices.Clone(holds)
	slices.SortFunc(holds, func(a, b hold) int { return cmp.Or(a.from.Compare(b.from), b.to.Compare(a.to)) })
	var out []Unheld
	var end time.Time
	var cause string
	for i, h := range holds {
		if i > 0 && h.from.After(end) {
			out = append(out, Unheld{Duration: h.from.Sub(end), Group: s.group, Partition: s.partition, From: end, To: h.from, Cause: cause})
		}
		if i == 0 || h.to.After(end) {
			end, cause = h.to, h.cause
		}
	}
	return out
}

func sortedSlots(holds map[slot][]hold) []slot {
	slots := make([]slot, 0, len(holds))
	for s := range holds {
		slots = append(slots, s)
	}
	slices.SortFunc(slots, func(a, b slot) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.partition, b.partition))
	})
	return slots
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
