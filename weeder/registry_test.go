package weeder

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	registryT0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	winEtcdA   = ServiceKey{Namespace: "shoot--a", Service: "etcd-main-client"}
	winKasA    = ServiceKey{Namespace: "shoot--a", Service: "kube-apiserver"}
	winEtcdB   = ServiceKey{Namespace: "shoot--b", Service: "etcd-main-client"}
	winEtcdC   = ServiceKey{Namespace: "shoot--c", Service: "etcd-main-client"}
)

// registryAt returns the time d after registryT0.
func registryAt(d time.Duration) time.Time { return registryT0.Add(d) }

func TestRegistryOpen(t *testing.T) {
	tests := []struct {
		name         string
		opens        []Window
		want         []OpenResult
		wantRunning  []Window
		wantQueued   []Window
		wantDeadline time.Time // of winEtcdA
	}{
		{
			name:         "new window starts",
			opens:        []Window{{winEtcdA, registryAt(5 * time.Minute)}},
			want:         []OpenResult{Started},
			wantRunning:  []Window{{winEtcdA, registryAt(5 * time.Minute)}},
			wantDeadline: registryAt(5 * time.Minute),
		},
		{
			name:         "later deadline extends",
			opens:        []Window{{winEtcdA, registryAt(5 * time.Minute)}, {winEtcdA, registryAt(7 * time.Minute)}},
			want:         []OpenResult{Started, Extended},
			wantRunning:  []Window{{winEtcdA, registryAt(7 * time.Minute)}},
			wantDeadline: registryAt(7 * time.Minute),
		},
		{
			name:         "earlier deadline is ignored",
			opens:        []Window{{winEtcdA, registryAt(5 * time.Minute)}, {winEtcdA, registryAt(1 * time.Minute)}},
			want:         []OpenResult{Started, Extended},
			wantRunning:  []Window{{winEtcdA, registryAt(5 * time.Minute)}},
			wantDeadline: registryAt(5 * time.Minute),
		},
		{
			name:         "third window is queued at max 2",
			opens:        []Window{{winEtcdB, registryAt(5 * time.Minute)}, {winKasA, registryAt(5 * time.Minute)}, {winEtcdA, registryAt(6 * time.Minute)}},
			want:         []OpenResult{Started, Started, Queued},
			wantRunning:  []Window{{winKasA, registryAt(5 * time.Minute)}, {winEtcdB, registryAt(5 * time.Minute)}},
			wantQueued:   []Window{{winEtcdA, registryAt(6 * time.Minute)}},
			wantDeadline: registryAt(6 * time.Minute),
		},
		{
			name: "queued window is extended, not duplicated",
			opens: []Window{
				{winEtcdB, registryAt(5 * time.Minute)}, {winKasA, registryAt(5 * time.Minute)},
				{winEtcdA, registryAt(6 * time.Minute)}, {winEtcdA, registryAt(8 * time.Minute)}, {winEtcdA, registryAt(2 * time.Minute)},
			},
			want:         []OpenResult{Started, Started, Queued, ExtendedQueued, ExtendedQueued},
			wantRunning:  []Window{{winKasA, registryAt(5 * time.Minute)}, {winEtcdB, registryAt(5 * time.Minute)}},
			wantQueued:   []Window{{winEtcdA, registryAt(8 * time.Minute)}},
			wantDeadline: registryAt(8 * time.Minute),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(2)
			var got []OpenResult
			for _, w := range tt.opens {
				got = append(got, r.Open(w.Key, w.Deadline))
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, windowsOrEmpty(tt.wantRunning), r.Running())
			assert.Equal(t, windowsOrEmpty(tt.wantQueued), r.Queued())
			assert.Equal(t, len(tt.wantQueued), r.QueuedLen())
			deadline, ok := r.Deadline(winEtcdA)
			assert.True(t, ok)
			assert.Equal(t, tt.wantDeadline, deadline)
		})
	}
}

func windowsOrEmpty(windows []Window) []Window {
	if windows == nil {
		return []Window{}
	}
	return windows
}

func TestRegistryExpire(t *testing.T) {
	r := NewRegistry(2)
	require.Equal(t, Started, r.Open(winEtcdA, registryAt(5*time.Minute)))
	require.Equal(t, Started, r.Open(winKasA, registryAt(10*time.Minute)))
	require.Equal(t, Queued, r.Open(winEtcdB, registryAt(12*time.Minute)))
	require.Equal(t, Queued, r.Open(winEtcdC, registryAt(13*time.Minute)))

	ended, started := r.Expire(registryAt(4 * time.Minute))
	assert.Empty(t, ended, "nothing is due yet")
	assert.Empty(t, started)

	ended, started = r.Expire(registryAt(5 * time.Minute))
	assert.Equal(t, []ServiceKey{winEtcdA}, ended, "a deadline equal to now ends the window")
	assert.Equal(t, []Window{{winEtcdB, registryAt(12 * time.Minute)}}, started, "the oldest queued window starts")
	assert.Equal(t, []Window{{winEtcdC, registryAt(13 * time.Minute)}}, r.Queued())

	ended, started = r.Expire(registryAt(20 * time.Minute))
	assert.Equal(t, []ServiceKey{winKasA, winEtcdB}, ended, "sorted by namespace, then service")
	assert.Empty(t, started, "winEtcdC expired while waiting and never starts")
	assert.Empty(t, r.Running())
	assert.Empty(t, r.Queued())
	_, ok := r.Deadline(winEtcdC)
	assert.False(t, ok)
}

func TestRegistryExpireDropsExpiredQueuedBeforePromoting(t *testing.T) {
	r := NewRegistry(1)
	r.Open(winEtcdA, registryAt(5*time.Minute))
	r.Open(winEtcdB, registryAt(3*time.Minute)) // queued, expires while waiting
	r.Open(winEtcdC, registryAt(9*time.Minute))

	ended, started := r.Expire(registryAt(6 * time.Minute))
	assert.Equal(t, []ServiceKey{winEtcdA}, ended)
	assert.Equal(t, []Window{{winEtcdC, registryAt(9 * time.Minute)}}, started)
}

func TestRegistryClose(t *testing.T) {
	r := NewRegistry(2)
	r.Open(winEtcdA, registryAt(5*time.Minute))
	r.Open(winKasA, registryAt(5*time.Minute))
	r.Open(winEtcdB, registryAt(6*time.Minute))
	r.Open(winEtcdC, registryAt(7*time.Minute))

	started := r.Close(winEtcdC) // queued: frees no slot
	assert.Empty(t, started)
	assert.Equal(t, []Window{{winEtcdB, registryAt(6 * time.Minute)}}, r.Queued())

	started = r.Close(winEtcdA, winKasA, ServiceKey{Namespace: "unknown", Service: "svc"})
	assert.Equal(t, []Window{{winEtcdB, registryAt(6 * time.Minute)}}, started)
	assert.Equal(t, []Window{{winEtcdB, registryAt(6 * time.Minute)}}, r.Running())
	assert.Empty(t, r.Queued())
	assert.Empty(t, r.Close())
}

func TestRegistryNextDeadline(t *testing.T) {
	r := NewRegistry(1)
	_, ok := r.NextDeadline()
	assert.False(t, ok, "no window")

	r.Open(winEtcdA, registryAt(5*time.Minute))
	r.Open(winEtcdB, registryAt(3*time.Minute)) // queued windows count: they expire while waiting
	next, ok := r.NextDeadline()
	assert.True(t, ok)
	assert.Equal(t, registryAt(3*time.Minute), next)

	r.Expire(next)
	next, ok = r.NextDeadline()
	assert.True(t, ok)
	assert.Equal(t, registryAt(5*time.Minute), next)
}

func TestRegistryInNamespaces(t *testing.T) {
	r := NewRegistry(2)
	r.Open(winKasA, registryAt(5*time.Minute))
	r.Open(winEtcdB, registryAt(6*time.Minute))
	r.Open(winEtcdC, registryAt(8*time.Minute))
	r.Open(winEtcdA, registryAt(7*time.Minute))

	notB := func(namespace string) bool { return namespace != "shoot--b" }
	assert.Equal(t, []Window{
		{winKasA, registryAt(5 * time.Minute)},  // running
		{winEtcdC, registryAt(8 * time.Minute)}, // queued, oldest first
		{winEtcdA, registryAt(7 * time.Minute)},
	}, r.InNamespaces(notB))
	assert.Empty(t, r.InNamespaces(func(string) bool { return false }))
}

func TestRegistryUnlimited(t *testing.T) {
	r := NewRegistry(0)
	for i := range 100 {
		require.Equal(t, Started, r.Open(ServiceKey{Namespace: fmt.Sprint(i), Service: "svc"}, registryAt(time.Minute)))
	}
	assert.Len(t, r.Running(), 100)
}

func TestRegistryConcurrentUse(t *testing.T) {
	r := NewRegistry(3)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				key := ServiceKey{Namespace: fmt.Sprintf("ns-%d", (w+i)%10), Service: "svc"}
				r.Open(key, registryAt(time.Duration(i)*time.Second))
				r.Expire(registryAt(time.Duration(i-20) * time.Second))
				r.Deadline(key)
				r.NextDeadline()
				r.InNamespaces(func(ns string) bool { return ns == key.Namespace })
				if i%7 == 0 {
					r.Close(key)
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, len(r.Running()), 3)
	ended, _ := r.Expire(registryAt(time.Hour))
	assert.LessOrEqual(t, len(ended), 3)
	assert.Empty(t, r.Running())
	assert.Empty(t, r.Queued())
}

func TestOpenResultString(t *testing.T) {
	assert.Equal(t, "Started", Started.String())
	assert.Equal(t, "ExtendedQueued", ExtendedQueued.String())
	assert.Equal(t, "Unknown", OpenResult(42).String())
}

// Queued returns the queued windows in queue order, oldest (next to start) first; the weeder itself
// needs only their number (QueuedLen).
func (r *Registry) Queued() []Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queuedWindows(func(string) bool { return true })
}
