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
	winEtcdD   = ServiceKey{Namespace: "shoot--d", Service: "etcd-main-client"}
)

// registryAt returns the time d after registryT0.
func registryAt(d time.Duration) time.Time { return registryT0.Add(d) }

// win is the real window of key until d after registryT0; synth the synthetic one.
func win(key ServiceKey, d time.Duration) Window { return Window{Key: key, Deadline: registryAt(d)} }

func synth(key ServiceKey, d time.Duration) Window {
	return Window{Key: key, Deadline: registryAt(d), Synthetic: true}
}

// opened is what one Open reported.
type opened struct {
	result    OpenResult
	displaced []ServiceKey
}

func TestRegistryOpen(t *testing.T) {
	tests := []struct {
		name        string
		opens       []Window
		want        []opened
		wantRunning []Window
		wantQueued  []Window
	}{
		{
			name:        "new window starts",
			opens:       []Window{win(winEtcdA, 5*time.Minute)},
			want:        []opened{{result: Started}},
			wantRunning: []Window{win(winEtcdA, 5*time.Minute)},
		},
		{
			name:        "later deadline extends",
			opens:       []Window{win(winEtcdA, 5*time.Minute), win(winEtcdA, 7*time.Minute)},
			want:        []opened{{result: Started}, {result: Extended}},
			wantRunning: []Window{win(winEtcdA, 7*time.Minute)},
		},
		{
			name:        "earlier deadline is ignored",
			opens:       []Window{win(winEtcdA, 5*time.Minute), win(winEtcdA, 1*time.Minute)},
			want:        []opened{{result: Started}, {result: Extended}},
			wantRunning: []Window{win(winEtcdA, 5*time.Minute)},
		},
		{
			name:        "third window is queued at max 2",
			opens:       []Window{win(winEtcdB, 5*time.Minute), win(winKasA, 5*time.Minute), win(winEtcdA, 6*time.Minute)},
			want:        []opened{{result: Started}, {result: Started}, {result: Queued}},
			wantRunning: []Window{win(winKasA, 5*time.Minute), win(winEtcdB, 5*time.Minute)},
			wantQueued:  []Window{win(winEtcdA, 6*time.Minute)},
		},
		{
			name: "queued window is extended, not duplicated",
			opens: []Window{
				win(winEtcdB, 5*time.Minute), win(winKasA, 5*time.Minute),
				win(winEtcdA, 6*time.Minute), win(winEtcdA, 8*time.Minute), win(winEtcdA, 2*time.Minute),
			},
			want:        []opened{{result: Started}, {result: Started}, {result: Queued}, {result: ExtendedQueued}, {result: ExtendedQueued}},
			wantRunning: []Window{win(winKasA, 5*time.Minute), win(winEtcdB, 5*time.Minute)},
			wantQueued:  []Window{win(winEtcdA, 8*time.Minute)},
		},
		{
			name:  "a real window takes the slot of the running synthetic one with the latest deadline",
			opens: []Window{synth(winEtcdB, 5*time.Minute), synth(winEtcdC, 6*time.Minute), synth(winEtcdD, 7*time.Minute), win(winEtcdA, 9*time.Minute)},
			want: []opened{{result: Started}, {result: Started}, {result: Queued},
				{result: Started, displaced: []ServiceKey{winEtcdC}}},
			wantRunning: []Window{win(winEtcdA, 9*time.Minute), synth(winEtcdB, 5*time.Minute)},
			wantQueued:  []Window{synth(winEtcdC, 6*time.Minute), synth(winEtcdD, 7*time.Minute)},
		},
		{
			name:        "a real window waits only when every running window is real, and ahead of the synthetic ones",
			opens:       []Window{win(winEtcdB, 5*time.Minute), win(winKasA, 5*time.Minute), synth(winEtcdC, 6*time.Minute), win(winEtcdA, 9*time.Minute)},
			want:        []opened{{result: Started}, {result: Started}, {result: Queued}, {result: Queued}},
			wantRunning: []Window{win(winKasA, 5*time.Minute), win(winEtcdB, 5*time.Minute)},
			wantQueued:  []Window{win(winEtcdA, 9*time.Minute), synth(winEtcdC, 6*time.Minute)},
		},
		{
			name:  "a queued synthetic window opened as real runs at once",
			opens: []Window{synth(winEtcdB, 5*time.Minute), win(winKasA, 5*time.Minute), synth(winEtcdC, 6*time.Minute), win(winEtcdC, 8*time.Minute)},
			want: []opened{{result: Started}, {result: Started}, {result: Queued},
				{result: Promoted, displaced: []ServiceKey{winEtcdB}}},
			wantRunning: []Window{win(winKasA, 5*time.Minute), win(winEtcdC, 8*time.Minute)},
			wantQueued:  []Window{synth(winEtcdB, 5*time.Minute)},
		},
		{
			name: "a queued synthetic window opened as real moves to the real queue when every running window is real",
			opens: []Window{win(winEtcdB, 5*time.Minute), win(winKasA, 5*time.Minute),
				synth(winEtcdC, 6*time.Minute), synth(winEtcdD, 6*time.Minute), win(winEtcdD, 4*time.Minute)},
			want:        []opened{{result: Started}, {result: Started}, {result: Queued}, {result: Queued}, {result: ExtendedQueued}},
			wantRunning: []Window{win(winKasA, 5*time.Minute), win(winEtcdB, 5*time.Minute)},
			wantQueued:  []Window{win(winEtcdD, 6*time.Minute), synth(winEtcdC, 6*time.Minute)},
		},
		{
			name: "a running synthetic window opened as real turns real and keeps its slot",
			opens: []Window{synth(winEtcdB, 5*time.Minute), synth(winKasA, 5*time.Minute), win(winEtcdB, 2*time.Minute),
				win(winEtcdA, 9*time.Minute), win(winEtcdC, 9*time.Minute)},
			want: []opened{{result: Started}, {result: Started}, {result: Extended},
				{result: Started, displaced: []ServiceKey{winKasA}}, {result: Queued}},
			wantRunning: []Window{win(winEtcdA, 9*time.Minute), win(winEtcdB, 5*time.Minute)},
			wantQueued:  []Window{win(winEtcdC, 9*time.Minute), synth(winKasA, 5*time.Minute)},
		},
		{
			name:        "a synthetic opening leaves a real window real",
			opens:       []Window{win(winEtcdA, 5*time.Minute), synth(winEtcdA, 6*time.Minute)},
			want:        []opened{{result: Started}, {result: Extended}},
			wantRunning: []Window{win(winEtcdA, 6*time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(2)
			var got []opened
			for _, w := range tt.opens {
				result, displaced := r.Open(w)
				got = append(got, opened{result, displaced})
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, windowsOrEmpty(tt.wantRunning), r.Running())
			assert.Equal(t, windowsOrEmpty(tt.wantQueued), r.Queued())
			assert.Equal(t, len(tt.wantQueued), r.QueuedLen())
		})
	}
}

func windowsOrEmpty(windows []Window) []Window {
	if windows == nil {
		return []Window{}
	}
	return windows
}

// mustOpen opens w and requires the result want, with no window displaced.
func mustOpen(t *testing.T, r *Registry, w Window, want OpenResult) {
	t.Helper()
	result, displaced := r.Open(w)
	require.Equal(t, want, result)
	require.Empty(t, displaced)
}

func TestRegistryExpire(t *testing.T) {
	r := NewRegistry(2)
	mustOpen(t, r, win(winEtcdA, 5*time.Minute), Started)
	mustOpen(t, r, win(winKasA, 10*time.Minute), Started)
	mustOpen(t, r, win(winEtcdB, 12*time.Minute), Queued)
	mustOpen(t, r, win(winEtcdC, 13*time.Minute), Queued)

	ended, started := r.Expire(registryAt(4 * time.Minute))
	assert.Empty(t, ended, "nothing is due yet")
	assert.Empty(t, started)

	ended, started = r.Expire(registryAt(5 * time.Minute))
	assert.Equal(t, []ServiceKey{winEtcdA}, ended, "a deadline equal to now ends the window")
	assert.Equal(t, []Window{win(winEtcdB, 12*time.Minute)}, started, "the oldest queued window starts")
	assert.Equal(t, []Window{win(winEtcdC, 13*time.Minute)}, r.Queued())

	ended, started = r.Expire(registryAt(20 * time.Minute))
	assert.Equal(t, []ServiceKey{winKasA, winEtcdB}, ended, "sorted by namespace, then service")
	assert.Empty(t, started, "winEtcdC expired while waiting and never starts")
	assert.Empty(t, r.Running())
	assert.Empty(t, r.Queued())
	_, ok := r.Deadline(winEtcdC)
	assert.False(t, ok)
}

func TestRegistryExpireStartsRealWindowsFirst(t *testing.T) {
	r := NewRegistry(1)
	mustOpen(t, r, win(winEtcdA, 5*time.Minute), Started)
	mustOpen(t, r, synth(winEtcdB, 6*time.Minute), Queued)
	mustOpen(t, r, win(winEtcdC, 7*time.Minute), Queued)

	_, started := r.Expire(registryAt(5 * time.Minute))
	assert.Equal(t, []Window{win(winEtcdC, 7*time.Minute)}, started, "the real window, though opened later")
	_, started = r.Expire(registryAt(7 * time.Minute))
	assert.Empty(t, started, "the synthetic one expired while waiting")
}

func TestRegistryNeverStartsAQueuedWindowWhoseDeadlinePassed(t *testing.T) {
	tests := []struct {
		name  string
		slots func(r *Registry, now time.Time) []Window
	}{
		{"Expire frees a slot", func(r *Registry, now time.Time) []Window { _, started := r.Expire(now); return started }},
		{"Close frees a slot", func(r *Registry, now time.Time) []Window { return r.Close(now, winEtcdA) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(1)
			mustOpen(t, r, win(winEtcdA, 5*time.Minute), Started)
			mustOpen(t, r, win(winEtcdB, 3*time.Minute), Queued)   // expires while waiting
			mustOpen(t, r, synth(winEtcdC, 4*time.Minute), Queued) // so does this one
			mustOpen(t, r, synth(winEtcdD, 9*time.Minute), Queued)

			started := tt.slots(r, registryAt(5*time.Minute))

			assert.Equal(t, []Window{synth(winEtcdD, 9*time.Minute)}, started)
			assert.Empty(t, r.Queued(), "the expired ones are dropped")
		})
	}
}

func TestRegistryClose(t *testing.T) {
	r := NewRegistry(2)
	r.Open(win(winEtcdA, 5*time.Minute))
	r.Open(win(winKasA, 5*time.Minute))
	r.Open(win(winEtcdB, 6*time.Minute))
	r.Open(win(winEtcdC, 7*time.Minute))
	now := registryAt(time.Minute)

	started := r.Close(now, winEtcdC) // queued: frees no slot
	assert.Empty(t, started)
	assert.Equal(t, []Window{win(winEtcdB, 6*time.Minute)}, r.Queued())

	started = r.Close(now, winEtcdA, winKasA, ServiceKey{Namespace: "unknown", Service: "svc"})
	assert.Equal(t, []Window{win(winEtcdB, 6*time.Minute)}, started)
	assert.Equal(t, []Window{win(winEtcdB, 6*time.Minute)}, r.Running())
	assert.Empty(t, r.Queued())
	assert.Empty(t, r.Close(now))
}

func TestRegistryNextDeadline(t *testing.T) {
	r := NewRegistry(1)
	_, ok := r.NextDeadline()
	assert.False(t, ok, "no window")

	r.Open(win(winEtcdA, 5*time.Minute))
	r.Open(win(winEtcdB, 3*time.Minute)) // queued windows count: they expire while waiting
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
	r.Open(win(winKasA, 5*time.Minute))
	r.Open(win(winEtcdB, 6*time.Minute))
	r.Open(synth(winEtcdD, 9*time.Minute))
	r.Open(win(winEtcdC, 8*time.Minute))
	r.Open(win(winEtcdA, 7*time.Minute))

	notB := func(namespace string) bool { return namespace != "shoot--b" }
	assert.Equal(t, []Window{
		win(winKasA, 5*time.Minute),    // running
		win(winEtcdC, 8*time.Minute),   // queued real windows, oldest first
		win(winEtcdA, 7*time.Minute),   //
		synth(winEtcdD, 9*time.Minute), // then the synthetic ones
	}, r.InNamespaces(notB))
	assert.Empty(t, r.InNamespaces(func(string) bool { return false }))
}

func TestRegistryUnlimited(t *testing.T) {
	r := NewRegistry(0)
	for i := range 100 {
		mustOpen(t, r, Window{Key: ServiceKey{Namespace: fmt.Sprint(i), Service: "svc"}, Deadline: registryAt(time.Minute), Synthetic: i%2 == 0}, Started)
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
				r.Open(Window{Key: key, Deadline: registryAt(time.Duration(i) * time.Second), Synthetic: i%3 == 0})
				r.Expire(registryAt(time.Duration(i-20) * time.Second))
				r.Deadline(key)
				r.NextDeadline()
				r.InNamespaces(func(ns string) bool { return ns == key.Namespace })
				if i%7 == 0 {
					r.Close(registryAt(time.Duration(i-20)*time.Second), key)
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
	assert.Equal(t, "Promoted", Promoted.String())
	assert.Equal(t, "Unknown", OpenResult(42).String())
}

// Queued returns the queued windows in the order they would start; the weeder itself needs only
// their number (QueuedLen).
func (r *Registry) Queued() []Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queuedWindows(func(string) bool { return true })
}

// Deadline returns the deadline of key's running or queued window; the weeder itself reads running
// windows with Running.
func (r *Registry) Deadline(key ServiceKey) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.running[key]; ok {
		return w.Deadline, true
	}
	w, ok := r.queued[key]
	return w.Deadline, ok
}
