package auditcheck

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/audit"
)

// Holder is one process: a member's incarnation in one process.
type Holder struct {
	Member      string
	Incarnation string
	Pid         int
}

func (h Holder) String() string {
	return fmt.Sprintf("%s/%s/%d", h.Member, h.Incarnation, h.Pid)
}

// Overlap is a time when two processes validly held the same partition.
type Overlap struct {
	Group     string
	Partition int
	A, B      Holder
	From, To  time.Time
}

// NonHolderWrite is a write sent while its sender did not validly hold the namespace's partition,
// or that named the wrong partition.
type NonHolderWrite struct {
	Write  audit.Record
	Reason string
}

// CrossGroupWrite is a write of one kind to a namespace that another group's process sent within a
// fence interval of a write of that kind there: two groups acting on one shoot in one role.
type CrossGroupWrite struct {
	Write, Before audit.Record
}

// Unheld is a time a partition had no valid holder, between the end of one valid hold and the start
// of the next.
type Unheld struct {
	Duration  time.Duration
	Group     string
	Partition int
	From, To  time.Time
	// Cause is how the hold before the gap ended: a release's cause, or CauseFenceExpired.
	Cause string
}

// Report is what Check found.
type Report struct {
	Processes int
	Acquires  int
	Releases  int
	Renewals  int
	// Writes counts the writes by "kind/result", e.g. "scale/ok".
	Writes          map[string]int
	Overlaps        []Overlap
	NonHolderWrites []NonHolderWrite
	// CrossGroupWrites are the writes another group's process made to the same namespace, of the same
	// kind, within a fence interval before (the longer renew deadline of the two processes).
	CrossGroupWrites []CrossGroupWrite
	// LongestUnheld is the longest of Gaps; zero when there is none.
	LongestUnheld Unheld
	// Gaps are every time a partition had no valid holder between two holds, by start.
	Gaps []Unheld
}

// OK returns nil when no two processes held a partition at once and every write came from a valid
// holder, else an error that counts the offences.
func (r *Report) OK() error {
	var errs []error
	if n := len(r.Overlaps); n > 0 {
		errs = append(errs, fmt.Errorf("%d overlapping holds of a partition", n))
	}
	if n := len(r.NonHolderWrites); n > 0 {
		errs = append(errs, fmt.Errorf("%d writes sent without a valid hold of their partition", n))
	}
	if n := len(r.CrossGroupWrites); n > 0 {
		errs = append(errs, fmt.Errorf("%d writes to a namespace that another group wrote within a fence interval", n))
	}
	return errors.Join(errs...)
}

// String summarises r for a reader.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "processes %d, acquires %d, releases %d, renewals %d\n", r.Processes, r.Acquires, r.Releases, r.Renewals)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range r.Writes {
			if !yield(k) {
				return
			}
		}
	})
	fmt.Fprintf(&b, "writes:")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s %d", k, r.Writes[k])
	}
	fmt.Fprintf(&b, "\noverlaps: %d\n", len(r.Overlaps))
	for _, o := range r.Overlaps {
		fmt.Fprintf(&b, "  group %s partition %d: %s and %s from %s to %s (%s)\n", o.Group, o.Partition, o.A, o.B,
			o.From.Format(time.RFC3339Nano), o.To.Format(time.RFC3339Nano), o.To.Sub(o.From))
	}
	fmt.Fprintf(&b, "writes across groups: %d\n", len(r.CrossGroupWrites))
	for _, w := range r.CrossGroupWrites {
		fmt.Fprintf(&b, "  %s %s/%s sent %s by group %s (%s), %s after group %s (%s)\n", w.Write.Kind, w.Write.Namespace, w.Write.Object,
			w.Write.Sent.Format(time.RFC3339Nano), w.Write.Group, holderOf(w.Write), w.Write.Sent.Sub(w.Before.Sent), w.Before.Group, holderOf(w.Before))
	}
	fmt.Fprintf(&b, "writes by a non-holder: %d\n", len(r.NonHolderWrites))
	for _, w := range r.NonHolderWrites {
		fmt.Fprintf(&b, "  %s %s %s/%s sent %s by %s: %s\n", w.Write.Kind, w.Write.Result, w.Write.Namespace, w.Write.Object,
			w.Write.Sent.Format(time.RFC3339Nano), holderOf(w.Write), w.Reason)
	}
	if u := r.LongestUnheld; u.Duration > 0 {
		fmt.Fprintf(&b, "longest unheld: %s, group %s partition %d, from %s to %s, after %s\n", u.Duration, u.Group, u.Partition,
			u.From.Format(time.RFC3339Nano), u.To.Format(time.RFC3339Nano), u.Cause)
	} else {
		fmt.Fprintf(&b, "longest unheld: none\n")
	}
	return b.String()
}

// CheckFiles reads the audit files and checks their records together. A malformed line or an
// unknown event is an error naming the file and line.
func CheckFiles(paths ...string) (*Report, error) {
	var records []audit.Record
	for _, path := range paths {
		read, err := audit.ReadFile(path)
		if err != nil {
			return nil, err
		}
		records = append(records, read...)
	}
	return Check(records), nil
}

// Check checks records, of any number of processes and in any order (see the package doc).
func Check(records []audit.Record) *Report {
	records = inProcessOrder(records)
	procs := replay(records)
	report := &Report{Processes: len(procs), Writes: map[string]int{}}
	holds := map[slot][]hold{}
	for _, p := range procs {
		report.Acquires += p.acquires
		report.Releases += p.releases
		report.Renewals += len(p.renewals)
		for s, hs := range p.validHolds() {
			holds[s] = append(holds[s], hs...)
		}
	}
	for _, s := range sortedSlots(holds) {
		report.Overlaps = append(report.Overlaps, overlaps(s, holds[s])...)
		report.Gaps = append(report.Gaps, gaps(s, holds[s])...)
	}
	slices.SortStableFunc(report.Gaps, func(a, b Unheld) int { return a.From.Compare(b.From) })
	for _, g := range report.Gaps {
		if g.Duration > report.LongestUnheld.Duration {
			report.LongestUnheld = g
		}
	}
	sent := writes(records)
	for _, w := range sent {
		report.Writes[w.Kind+"/"+w.Result]++
		if reason := procs[holderOf(w)].judge(w); reason != "" {
			report.NonHolderWrites = append(report.NonHolderWrites, NonHolderWrite{Write: w, Reason: reason})
		}
	}
	report.CrossGroupWrites = crossGroupWrites(sent, procs)
	return report
}

// crossGroupWrites finds, per namespace and kind of write, the writes sent within a fence interval of
// the previous one there by a process of another group: whatever each group's holds say, two groups
// acted on one shoot in one role. sent is in the order of sending.
func crossGroupWrites(sent []audit.Record, procs map[Holder]*process) []CrossGroupWrite {
	type target struct{ namespace, kind string }
	last := map[target]audit.Record{}
	var out []CrossGroupWrite
	for _, w := range sent {
		t := target{w.Namespace, w.Kind}
		before, ok := last[t]
		last[t] = w
		if !ok || before.Group == w.Group {
			continue
		}
		interval := max(procs[holderOf(w)].deadline(), procs[holderOf(before)].deadline())
		if w.Sent.Sub(before.Sent) < interval {
			out = append(out, CrossGroupWrite{Write: w, Before: before})
		}
	}
	return out
}

// inProcessOrder sorts records by process, and the records of a process by its monotonic clock
// (then by wall time, for records without one): a step of a process's wall clock must not reorder
// its acquires, releases, renewals and writes.
func inProcessOrder(records []audit.Record) []audit.Record {
	records = slices.Clone(records)
	slices.SortStableFunc(records, func(a, b audit.Record) int {
		return cmp.Or(cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.Member, b.Member), cmp.Compare(a.Incarnation, b.Incarnation),
			cmp.Compare(a.Mono, b.Mono), a.Wall.Compare(b.Wall))
	})
	return records
}

// writes returns the writes to judge, by send time: each send with the result its write line gives
// (ResultUnanswered when there is none), and each write line that has no send (no ID).
func writes(records []audit.Record) []audit.Record {
	type key struct {
		holder Holder
		id     uint64
	}
	var out []audit.Record
	sent := map[key]int{}
	for _, r := range records {
		if r.Event == audit.EventSend {
			r.Result = audit.ResultUnanswered
			sent[key{holderOf(r), r.ID}] = len(out)
			out = append(out, r)
		}
	}
	for _, r := range records {
		if r.Event != audit.EventWrite {
			continue
		}
		if i, ok := sent[key{holderOf(r), r.ID}]; ok && r.ID != 0 {
			out[i].Result = r.Result
			continue
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b audit.Record) int { return a.Sent.Compare(b.Sent) })
	return out
}

// holderOf is the process that wrote r.
func holderOf(r audit.Record) Holder {
	return Holder{Member: r.Member, Incarnation: r.Incarnation, Pid: r.Pid}
}
