package weeder

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Window is a weeding window: the pods depending on Key's service are weeded until Deadline.
type Window struct {
	Key      ServiceKey
	Deadline time.Time
}

// OpenResult says what Open did.
type OpenResult int

const (
	// Started: the window is new and runs now; the caller starts its pod watches.
	Started OpenResult = iota
	// Extended: the window was running; its deadline is now the later of the two.
	Extended
	// Queued: the window is new and waits for a free slot.
	Queued
	// ExtendedQueued: the window was waiting; its deadline is now the later of the two.
	ExtendedQueued
)

// String returns the result's name, for logs.
func (r OpenResult) String() string {
	switch r {
	case Started:
		return "Started"
	case Extended:
		return "Extended"
	case Queued:
		return "Queued"
	case ExtendedQueued:
		return "ExtendedQueued"
	}
	return "Unknown"
}

// Registry keeps the weeding windows: at most max run at once, the others wait in a FIFO queue.
// It only keeps books (no goroutines, no clients); the caller starts and stops the watches of the
// windows it reports started and ended, and calls Expire at NextDeadline. It is safe for concurrent
// use.
//
// A window is never duplicated: opening a window that is running or queued extends it to the later
// deadline (an earlier one changes nothing; Deadline tells the effective deadline). A queued
// window's deadline keeps running while it waits; one that expires before a slot frees up is
// dropped without ever starting.
type Registry struct {
	mu      sync.Mutex
	max     int
	running map[ServiceKey]time.Time
	queued  map[ServiceKey]time.Time
	queue   []ServiceKey // keys of queued, oldest first
}

// NewRegistry returns a Registry that runs at most maxRunning windows at once; maxRunning < 1
// means no limit.
func NewRegistry(maxRunning int) *Registry {
	return &Registry{
		max:     maxRunning,
		running: map[ServiceKey]time.Time{},
		queued:  map[ServiceKey]time.Time{},
	}
}

// Open opens the window of key until deadline, or extends it if it is running or queued.
func (r *Registry) Open(key ServiceKey, deadline time.Time) OpenResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.running[key]; ok {
		r.running[key] = later(old, deadline)
		return Extended
	}
	if old, ok := r.queued[key]; ok {
		r.queued[key] = later(old, deadline)
		return ExtendedQueued
	}
	if r.hasSlot() {
		r.running[key] = deadline
		return Started
	}
	r.queued[key] = deadline
	r.queue = append(r.queue, key)
	return Queued
}

// Expire ends the running windows whose deadline is at or before now, drops the queued windows
// that expired while waiting, and starts queued windows, oldest first, in the free slots. ended
// holds only windows that were running (sorted), started those it promoted (oldest first).
func (r *Registry) Expire(now time.Time) (ended []ServiceKey, started []Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, deadline := range r.running {
		if !deadline.After(now) {
			ended = append(ended, key)
			delete(r.running, key)
		}
	}
	slices.SortFunc(ended, compareKeys)
	r.dropQueued(func(key ServiceKey) bool { return !r.queued[key].After(now) })
	return ended, r.promote()
}

// Close ends the given windows, running or queued (e.g. their namespace was handed over), and
// starts queued windows in the freed slots like Expire. A promoted window whose deadline has
// already passed is ended by the next Expire. Unknown keys are ignored.
func (r *Registry) Close(keys ...ServiceKey) (started []Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	closing := make(map[ServiceKey]bool, len(keys))
	for _, key := range keys {
		closing[key] = true
		delete(r.running, key)
	}
	r.dropQueued(func(key ServiceKey) bool { return closing[key] })
	return r.promote()
}

// Running returns the running windows sorted by namespace and service.
func (r *Registry) Running() []Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runningWindows(func(string) bool { return true })
}

// QueuedLen returns the number of queued windows.
func (r *Registry) QueuedLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// Deadline returns the deadline of key's running or queued window.
func (r *Registry) Deadline(key ServiceKey) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if deadline, ok := r.running[key]; ok {
		return deadline, true
	}
	deadline, ok := r.queued[key]
	return deadline, ok
}

// NextDeadline returns the earliest deadline among running and queued windows: when Expire has
// something to do next. It returns false when there is no window.
func (r *Registry) NextDeadline() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var next time.Time
	found := false
	for _, windows := range []map[ServiceKey]time.Time{r.running, r.queued} {
		for _, deadline := range windows {
			if !found || deadline.Before(next) {
				next, found = deadline, true
			}
		}
	}
	return next, found
}

// InNamespaces returns the windows of the namespaces that match, for a handover: the running ones
// sorted, then the queued ones oldest first, so that reopening them in order keeps their priority.
func (r *Registry) InNamespaces(match func(namespace string) bool) []Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(r.runningWindows(match), r.queuedWindows(match)...)
}

// hasSlot reports whether another window may run. Callers hold r.mu.
func (r *Registry) hasSlot() bool {
	return r.max < 1 || len(r.running) < r.max
}

// promote starts queued windows, oldest first, while there are free slots. Callers hold r.mu.
func (r *Registry) promote() []Window {
	var started []Window
	for len(r.queue) > 0 && r.hasSlot() {
		key := r.queue[0]
		r.queue = r.queue[1:]
		deadline := r.queued[key]
		delete(r.queued, key)
		r.running[key] = deadline
		started = append(started, Window{Key: key, Deadline: deadline})
	}
	if len(r.queue) == 0 {
		r.queue = nil // let the backing array of a long drained queue go
	}
	return started
}

// dropQueued removes the queued windows for which drop is true, keeping the order of the others.
// Callers hold r.mu.
func (r *Registry) dropQueued(drop func(ServiceKey) bool) {
	r.queue = slices.DeleteFunc(r.queue, func(key ServiceKey) bool {
		if drop(key) {
			delete(r.queued, key)
			return true
		}
		return false
	})
}

// runningWindows returns the running windows of matching namespaces, sorted. Callers hold r.mu.
func (r *Registry) runningWindows(match func(string) bool) []Window {
	windows := []Window{}
	for key, deadline := range r.running {
		if match(key.Namespace) {
			windows = append(windows, Window{Key: key, Deadline: deadline})
		}
	}
	slices.SortFunc(windows, func(a, b Window) int { return compareKeys(a.Key, b.Key) })
	return windows
}

// queuedWindows returns the queued windows of matching namespaces, oldest first. Callers hold r.mu.
func (r *Registry) queuedWindows(match func(string) bool) []Window {
	windows := []Window{}
	for _, key := range r.queue {
		if match(key.Namespace) {
			windows = append(windows, Window{Key: key, Deadline: r.queued[key]})
		}
	}
	return windows
}

// compareKeys orders keys by namespace, then service.
func compareKeys(a, b ServiceKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Service, b.Service))
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
