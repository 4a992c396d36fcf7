package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func testProcess(member string) Process {
	return Process{Group: "g", Member: member, Incarnation: "i-" + member, Partitions: 7, RenewDeadline: 10 * time.Second, LeaseDuration: 15 * time.Second}
}

func TestLogWritesEveryEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	clk := clocktesting.NewFakePassiveClock(t0)
	p := testProcess("dwd-0")
	p.Clock = clk
	l, err := Open(path, p)
	require.NoError(t, err)
	clk.SetTime(at(1))
	l.Renewed(at(11))
	l.Acquired(3, "fresh")
	w := l.Sending(Write{Kind: KindDelete, Namespace: "shoot--a--b", Object: "Pod/p", Partition: 3, Sent: l.Now()})
	clk.SetTime(at(1.5))
	l.Wrote(w, nil)
	l.Released(3, "leave")
	require.NoError(t, l.Close())
	l.Acquired(4, "fresh") // dropped after Close

	records, err := ReadFile(path)
	require.NoError(t, err)
	who := Record{Member: "dwd-0", Incarnation: "i-dwd-0", Group: "g", Pid: os.Getpid()}
	stamp := func(r Record, s float64) Record {
		r.Member, r.Incarnation, r.Group, r.Pid, r.Wall, r.Mono = who.Member, who.Incarnation, who.Group, who.Pid, at(s), at(s).Sub(t0)
		return r
	}
	assert.Equal(t, []Record{
		stamp(Record{Event: EventStart, Partitions: 7, RenewDeadline: 10 * time.Second, LeaseDuration: 15 * time.Second}, 0),
		stamp(Record{Event: EventRenew, Fence: at(11)}, 1),
		stamp(Record{Event: EventAcquire, Partition: 3, Cause: "fresh"}, 1),
		stamp(Record{Event: EventSend, ID: 1, Kind: KindDelete, Namespace: "shoot--a--b", Object: "Pod/p", Partition: 3, Sent: at(1)}, 1),
		stamp(Record{Event: EventWrite, ID: 1, Kind: KindDelete, Namespace: "shoot--a--b", Object: "Pod/p", Partition: 3, Sent: at(1), Result: ResultOK}, 1.5),
		stamp(Record{Event: EventRelease, Partition: 3, Cause: "leave"}, 1.5),
	}, normalise(records))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	assert.NotContains(t, lines[0], `"partition"`, "a start names no partition")
	assert.Contains(t, lines[2], `"partition":3`)
}

// normalise drops the time zones and monotonic readings that a round trip through JSON changes.
func normalise(records []Record) []Record {
	for i := range records {
		r := &records[i]
		r.Wall, r.Fence, r.Sent = r.Wall.UTC(), utc(r.Fence), utc(r.Sent)
	}
	return records
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func TestLogConcurrentAppendsAreWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	logs := make([]*Log, 3) // three processes' logs on one file, as if they shared it
	for i := range logs {
		var err error
		logs[i], err = Open(path, testProcess(fmt.Sprintf("dwd-%d", i)))
		require.NoError(t, err)
	}
	const perWriter = 200
	var wg sync.WaitGroup
	for _, l := range logs {
		for w := range 4 {
			wg.Go(func() {
				for i := range perWriter {
					l.Acquired(w*perWriter+i, strings.Repeat("x", 100))
				}
			})
		}
	}
	wg.Wait()
	for _, l := range logs {
		require.NoError(t, l.Close())
	}
	records, err := ReadFile(path)
	require.NoError(t, err, "every line is whole")
	assert.Len(t, records, 3+3*4*perWriter)
}

func TestLogReopenedFileAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	for range 2 {
		l, err := Open(path, testProcess("dwd-0"))
		require.NoError(t, err)
		l.Renewed(time.Now().Add(time.Second))
		require.NoError(t, l.Close())
	}
	records, err := ReadFile(path)
	require.NoError(t, err)
	events := make([]string, len(records))
	for i, r := range records {
		events[i] = r.Event
	}
	assert.Equal(t, []string{EventStart, EventRenew, EventStart, EventRenew}, events)
}

func TestNilLogRecordsNothing(t *testing.T) {
	var l *Log
	assert.NotPanics(t, func() {
		l.Renewed(time.Now())
		l.Acquired(1, "fresh")
		l.Released(1, "leave")
		l.Wrote(Write{}, nil)
		assert.True(t, l.Now().IsZero())
		assert.NoError(t, l.Close())
	})
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "missing", "audit.jsonl"), testProcess("dwd-0"))
	assert.ErrorContains(t, err, "opening audit log")
	p := testProcess("dwd-0")
	p.Partitions = 0
	_, err = Open(filepath.Join(t.TempDir(), "audit.jsonl"), p)
	assert.ErrorContains(t, err, "partition count 0")
}

func TestResult(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	tests := []struct {
		err  error
		want string
	}{
		{nil, ResultOK},
		{apierrors.NewConflict(gr, "kcm", errors.New("changed")), ResultConflict},
		{fmt.Errorf("patch: %w", context.DeadlineExceeded), ResultCanceled},
		{apierrors.NewNotFound(coordinationv1.Resource("leases"), "x"), "notfound"},
		{apierrors.NewTooManyRequests("slow down", 1), "toomanyrequests"},
		{errors.New("dial tcp: connection refused; token=secret"), ResultError},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, Result(tt.err))
		})
	}
}

func TestReadFileErrorsNameTheLine(t *testing.T) {
	good := `{"event":"renew","wall":"2025-01-01T12:00:00Z","mono":0,"member":"m","incarnation":"i","group":"g","pid":1,"fence":"2025-01-01T12:00:10Z"}`
	tests := []struct {
		name, line, want string
	}{
		{"malformed", `{"event":"renew",`, "audit.jsonl:2: "},
		{"unknown event", strings.Replace(good, `"renew"`, `"sneeze"`, 1), `audit.jsonl:2: unknown event "sneeze"`},
		{"renew without fence", strings.Replace(good, `,"fence":"2025-01-01T12:00:10Z"`, "", 1), "audit.jsonl:2: renew without fence"},
		{"acquire without partition", strings.Replace(good, `"renew"`, `"acquire"`, 1), "audit.jsonl:2: acquire without a partition"},
		{"bad duration", strings.Replace(good, `"renew"`, `"start","partitions":1,"renewDeadline":"soon"`, 1), "audit.jsonl:2: renewDeadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(good+"\n"+tt.line+"\n"), 0o644))
			_, err := ReadFile(path)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	_, err := ReadFile(filepath.Join(t.TempDir(), "none"))
	assert.ErrorContains(t, err, "reading audit file")
}
