package memlimit

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ReturnAfter is how long after the last large shrink of the caches Returner returns the freed
// memory: long enough for the caches to have dropped what left (their streams delete it within a
// reconcile or two) and for a rebalance's further shrinks to have come.
const ReturnAfter = 30 * time.Second

// Returner returns the memory of what the caches dropped to the operating system once they stopped
// shrinking. The runtime's background scavenger gives it back only slowly, paced to about 1 % of a
// core: a replica whose share fell to a third when its peers joined kept the memory of the whole
// share for minutes (the bench's replicas of three, docs/caches.md).
type Returner struct {
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Free returns the memory (debug.FreeOSMemory: a garbage collection, then every free page).
	Free func()

	mu      sync.Mutex
	pending bool
	last    time.Time
}

// Shrunk records a large shrink of the caches: Free runs once ReturnAfter has passed since the last
// one, whatever more come meanwhile.
func (r *Returner) Shrunk() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = r.clock().Now()
	if r.pending {
		return
	}
	r.pending = true
	go r.waitAndFree()
}

// waitAndFree waits until ReturnAfter has passed since the last shrink, then frees.
func (r *Returner) waitAndFree() {
	for {
		r.mu.Lock()
		rest := ReturnAfter - r.clock().Since(r.last)
		if rest <= 0 {
			r.pending = false
			r.mu.Unlock()
			r.Free()
			return
		}
		r.mu.Unlock()
		<-r.clock().After(rest)
	}
}

func (r *Returner) clock() clock.WithTicker {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}
