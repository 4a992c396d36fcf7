package weeder

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Window is a weeding window: the pods depending on Key's service are weeded until Deadline.
//
// A Synthetic window was opened for a service that was already ready when this replica took its
// partition over after a crash or at the group's start, as the original does on a restart; any
// other window is real: its service turned ready. A real window never waits behind a synthetic one.
type Window struct {
	Key       ServiceKey
	Deadline  time.Time
	Synthetic bool
}

// merge returns w opened again as o: the later deadline, and real if either is.
func (w Window) merge(o Window) Window {
	return Window{Key: w.Key, Deadline: later(w.Deadline, o.Deadline), Synthetic: w.Synthetic && o.Synthetic}
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
	// Promoted: the window was waiting as a synthetic one and runs now that it is real; the caller
	// starts its pod watches.
	Promoted
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
	case Promoted:
		return "Promoted"
	}
	return "Unknown"
}

// Registry keeps the weeding windows: at most max run at once, the others wait in two FIFO queues,
// the real windows' before the synthetic ones'. It only keeps books (no goroutines, no clients); the
// caller starts and stops the watches of the windows it reports started and ended, and calls Expire
// at NextDeadline. It is safe for concurrent use.
//
// A window is never duplicated: opening a window that is running or queued extends it to the later
// deadline (an earlier one changes nothing; a real opening makes it real). A real window that finds
// every slot taken takes the slot of a running synthetic one, which goes back to the head of the
// synthetic queue; only when all running windows are real does it wait. A queued window's deadline
// keeps running while it waits; one whose deadline has passed is dropped without ever starting.
type Registry struct {
	mu      sync.Mutex
	max     int
	running map[ServiceKey]Window
	queued  map[ServiceKey]Window
	// realQueue and syntheticQueue hold the keys of queued, oldest first; a slot goes to the real
	// queue's head first.
	realQueue, syntheticQueue []ServiceKey
}

// NewRegistry returns a Registry that runs at most maxRunning windows at once; maxRunning < 1
// means no limit.
func NewRegistry(maxRunning int) *Registry {
	return &Registry{
		max:     maxRunning,
		running: map[ServiceKey]Window{},
		queued:  map[ServiceKey]Window{},
	}
}

// Open opens w, or extends its window if it is running or queued. displaced holds the synthetic
// window whose slot w took, now queued again: the caller stops its pod watches.
func (r *Registry) Open(w Window) (result OpenResult, displaced []ServiceKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.running[w.Key]; ok {
		r.running[w.Key] = old.merge(w)
		return Extended, nil
	}
	old, waiting := r.queued[w.Key]
	if waiting && (w.Synthetic || !old.Synthetic) {
		r.queued[w.Key] = old.merge(w)
		return ExtendedQueued, nil
	}
	if waiting { // a real opening of a window queued as synthetic: it leaves the synthetic queue
		r.unqueue(w.Key)
		w = old.merge(w)
	}
	displaced = r.makeRoomFor(w)
	switch {
	case r.hasSlot():
		r.running[w.Key] = w
		return startedOrPromoted(waiting), displaced
	case waiting:
		r.enqueue(w)
		return ExtendedQueued, nil
	}
	r.enqueue(w)
	return Queued, nil
}

func startedOrPromoted(waiting bool) OpenResult {
	if waiting {
		return Promoted
	}
	return Started
}

// makeRoomFor frees a slot for a real window when every slot is taken and one of them runs a
// synthetic window: the one with the latest deadline goes back to the head of the synthetic queue.
// Callers hold r.mu.
func (r *Registry) makeRoomFor(w Window) []ServiceKey {
	if w.Synthetic || r.hasSlot() {
		return nil
	}
	var yield *Window
	for _, running := range r.running {
		if running.Synthetic && (yield == nil || yieldsBefore(running, *yield)) {
			yield = &running
		}
	}
	if yield == nil {
		return nil
	}
	delete(r.running, yield.Key)
	r.queued[yield.Key] = *yield
	r.syntheticQueue = slices.Insert(r.syntheticQueue, 0, yield.Key)
	return []ServiceKey{yield.Key}
}

// yieldsBefore orders running synthetic windows by which gives up its slot first: the latest
// deadline (it loses the smallest share of its time), then the last key.
func yieldsBefore(a, b Window) bool {
	if !a.Deadline.Equal(b.Deadline) {
		return a.Deadline.After(b.Deadline)
	}
	return compareKeys(a.Key, b.Key) > 0
}

// Expire ends the running windows whose deadline is at or before now, drops the queued windows
// that expired while waiting, and starts queued windows, real ones first, oldest first, in the free
// slots. ended holds only windows that were running (sorted), started those it promoted.
func (r *Registry) Expire(now time.Time) (ended []ServiceKey, started []Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, w := range r.running {
		if !w.Deadline.After(now) {
			ended = append(ended, key)
			delete(r.running, key)
		}
	}
	slices.SortFunc(ended, compareKeys)
	return ended, r.promote(now)
}

// Close ends the given windows, running or queued (e.g. their namespace was handed over), and
// starts queued windows in the freed slots like Expire: never one whose deadline is at or before
// now. Unknown keys are ignored.
func (r *Registry) Close(now time.Time, keys ...ServiceKey) (started []Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	closing := make(map[ServiceKey]bool, len(keys))
	for _, key := range keys {
		closing[key] = true
		delete(r.running, key)
	}
	r.dropQueued(func(w Window) bool { return closing[w.Key] })
	return r.promote(now)
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
	return len(r.queued)
}

// NextDeadline returns the earliest deadline among running and queued windows: when Expire has
// something to do next. It returns false when there is no window.
func (r *Registry) NextDeadline() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var next time.Time
	found := false
	for _, windows := range []map[ServiceKey]Window{r.running, r.queued} {
		for _, w := range windows {
			if !found || w.Deadline.Before(next) {
				next, found = w.Deadline, true
			}
		}
	}
	return next, found
}

// InNamespaces returns the windows of the namespaces that match, for a handover: the running ones
// sorted, then the queued ones in the order they would start, so that reopening them in order keeps
// their priority.
func (r *Registry) InNamespaces(match func(namespace string) bool) []Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(r.runningWindows(match), r.queuedWindows(match)...)
}

// hasSlot reports whether another window may run. Callers hold r.mu.
func (r *Registry) hasSlot() bool {
	return r.max < 1 || len(r.running) < r.max
}

// enqueue queues w at the tail of its kind's queue. Callers hold r.mu.
func (r *Registry) enqueue(w Window) {
	r.queued[w.Key] = w
	if w.Synthetic {
		r.syntheticQueue = append(r.syntheticQueue, w.Key)
	} else {
		r.realQueue = append(r.realQueue, w.Key)
	}
}

// unqueue removes a queued window. Callers hold r.mu.
func (r *Registry) unqueue(key ServiceKey) {
	r.dropQueued(func(w Window) bool { return w.Key == key })
}

// promote drops the queued windows whose deadline is at or before now, then starts queued ones,
// real before synthetic, oldest first, while there are free slots. Callers hold r.mu.
func (r *Registry) promote(now time.Time) []Window {
	r.dropQueued(func(w Window) bool { return !w.Deadline.After(now) })
	var started []Window
	for r.hasSlot() {
		queue := &r.realQueue
		if len(*queue) == 0 {
			queue = &r.syntheticQueue
		}
		if len(*queue) == 0 {
			break
		}
		key := (*queue)[0]
		*queue = (*queue)[1:]
		w := r.queued[key]
		delete(r.queued, key)
		r.running[key] = w
		started = append(started, w)
	}
	r.releaseDrained()
	return started
}

// releaseDrained lets the backing arrays of drained queues go. Callers hold r.mu.
func (r *Registry) releaseDrained() {
	if len(r.realQueue) == 0 {
		r.realQueue = nil
	}
	if len(r.syntheticQueue) == 0 {
		r.syntheticQueue = nil
	}
}

// dropQueued removes the queued windows for which drop is true, keeping the order of the others.
// Callers hold r.mu.
func (r *Registry) dropQueued(drop func(Window) bool) {
	for _, queue := range []*[]ServiceKey{&r.realQueue, &r.syntheticQueue} {
		*queue = slices.DeleteFunc(*queue, func(key ServiceKey) bool {
			if drop(r.queued[key]) {
				delete(r.queued, key)
				return true
			}
			return false
		})
	}
}

// runningWindows returns the running windows of matching namespaces, sorted. Callers hold r.mu.
func (r *Registry) runningWindows(match func(string) bool) []Window {
	windows := []Window{}
	for _, w := range r.running {
		if match(w.Key.Namespace) {
			windows = append(windows, w)
		}
	}
	slices.SortFunc(windows, func(a, b Window) int { return compareKeys(a.Key, b.Key) })
	return windows
}

// queuedWindows returns the queued windows of matching namespaces in the order they would start.
// Callers hold r.mu.
func (r *Registry) queuedWindows(match func(string) bool) []Window {
	windows := []Window{}
	for _, key := range slices.Concat(r.realQueue, r.syntheticQueue) {
		if match(key.Namespace) {
			windows = append(windows, r.queued[key])
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
