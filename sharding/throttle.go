package sharding

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// reconcileThrottle is the least time between two reconciles that Lease events start. Every member's
// renewal reaches every replica, so without it a replica of a group of N reconciles about N times per
// retry period, twice over when it runs both roles (each group also watches the other's member
// leases): at 30 members, 60 times a second, each walking every partition (docs/sharding.md,
// "Reconciles per group are bounded"). With it, at most 1/reconcileThrottle a second per group,
// whatever N; a handover waits at most this much longer for the event that starts it.
const reconcileThrottle = 200 * time.Millisecond

// throttle adds a key to a queue for an event at once, unless it added one less than interval ago:
// then once that interval has passed, and the events until then ride on that add. Safe for
// concurrent use.
type throttle struct {
	clock    clock.PassiveClock
	interval time.Duration

	mu   sync.Mutex
	last time.Time // when the last add took, or takes, effect
}

func (t *throttle) add(queue workqueue.TypedDelayingInterface[string], key string) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch next := t.last.Add(t.interval); {
	case !now.Before(next):
		t.last = now
		queue.Add(key)
	case now.Before(t.last):
		// An add is due at t.last: the reconcile it starts sees this event too.
	default:
		t.last = next
		queue.AddAfter(key, next.Sub(now))
	}
}
