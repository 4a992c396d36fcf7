package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// Process is who writes an audit file, and the settings of its group the checker needs.
type Process struct {
	Group  string
	Member string
	// Incarnation is the member lease's incarnation, or a per-process UUID in the leader mode.
	Incarnation string
	// Partitions is the group's partition count (1 in the leader mode).
	Partitions int
	// PartitionFunction is how the group maps namespaces to partitions (sharding.Partitions).
	PartitionFunction string
	RenewDeadline     time.Duration
	LeaseDuration     time.Duration
	// Clock gives the wall and monotonic times of the records; defaults to the real clock.
	Clock clock.PassiveClock
}

// Log appends the audit records of one process to a file (see the package doc). A nil *Log records
// nothing.
type Log struct {
	file   *os.File
	clock  clock.PassiveClock
	opened time.Time
	who    Record // the fields every record shares
	sends  atomic.Uint64
	mu     sync.Mutex
	buf    []byte
}

// Open opens path for appending, creating it if need be, and records the process's start.
func Open(path string, p Process) (*Log, error) {
	if p.Partitions < 1 {
		return nil, fmt.Errorf("opening audit log %s: partition count %d, want at least 1", path, p.Partitions)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	l := &Log{file: f, clock: clk, opened: clk.Now(),
		who: Record{Member: p.Member, Incarnation: p.Incarnation, Group: p.Group, Pid: os.Getpid()}}
	err = l.append(Record{Event: EventStart, Partitions: p.Partitions, PartitionFunction: p.PartitionFunction, RenewDeadline: p.RenewDeadline, LeaseDuration: p.LeaseDuration})
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return l, nil
}

// Close closes the file; records after it are dropped.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.file
	l.file = nil
	if f == nil {
		return nil
	}
	return f.Close()
}

// Now returns the time on the Log's clock, for a write's Sent; the zero time for a nil Log.
func (l *Log) Now() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.clock.Now()
}

// Renewed records a successful renewal that lets the process act until fence.
func (l *Log) Renewed(fence time.Time) {
	if l != nil {
		l.record(Record{Event: EventRenew, Fence: fence})
	}
}

// Acquired records that the work of partition starts here; call it before the work starts.
func (l *Log) Acquired(partition int, cause string) {
	if l != nil {
		l.record(Record{Event: EventAcquire, Partition: partition, Cause: cause})
	}
}

// Released records that the work of partition has stopped here; call it once it has.
func (l *Log) Released(partition int, cause string) {
	if l != nil {
		l.record(Record{Event: EventRelease, Partition: partition, Cause: cause})
	}
}

// Write is a write sent to the seed on a shoot namespace's behalf.
type Write struct {
	Kind      string // KindScale or KindDelete
	Namespace string
	Object    string // kind/name
	Partition int
	// Sent is the moment just before the request was sent.
	Sent time.Time
	// ID pairs the send and the result of the write in the file; Sending sets it.
	ID uint64
}

// Sending records that w is about to be sent; call it right before the request, and Wrote with what
// it returns once the answer came. So a write in flight when the process is killed is on record.
func (l *Log) Sending(w Write) Write {
	if l == nil {
		return w
	}
	w.ID = l.sends.Add(1)
	l.record(Record{Event: EventSend, ID: w.ID, Kind: w.Kind, Namespace: w.Namespace, Object: w.Object,
		Partition: w.Partition, Sent: w.Sent})
	return w
}

// Wrote records the result of w (see Result), which Sending returned.
func (l *Log) Wrote(w Write, err error) {
	if l != nil {
		l.record(Record{Event: EventWrite, ID: w.ID, Kind: w.Kind, Namespace: w.Namespace, Object: w.Object,
			Partition: w.Partition, Sent: w.Sent, Result: Result(err)})
	}
}

// Result classifies a write's error: ResultOK, ResultConflict, ResultCanceled, the API status
// reason in lower case (notfound, toomanyrequests, …), else ResultError. It never includes the
// error's text, which may name what the audit file should not hold.
func Result(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case apierrors.IsConflict(err):
		return ResultConflict
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return ResultCanceled
	}
	if reason := apierrors.ReasonForError(err); reason != "" {
		return strings.ToLower(string(reason))
	}
	return ResultError
}

// record stamps r and appends it; a failure to write is dropped (the audit must not stop the work),
// and shows as a gap or a missing record in the check.
func (l *Log) record(r Record) {
	_ = l.append(r)
}

// append writes r as one line with one write call.
func (l *Log) append(r Record) error {
	now := l.clock.Now()
	r.Wall, r.Mono = now, now.Sub(l.opened)
	r.Member, r.Incarnation, r.Group, r.Pid = l.who.Member, l.who.Incarnation, l.who.Group, l.who.Pid
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return errors.New("audit log closed")
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	l.buf = append(append(l.buf[:0], data...), '\n')
	if _, err := l.file.Write(l.buf); err != nil {
		return fmt.Errorf("writing audit log: %w", err)
	}
	return nil
}
