package weeder

import (
	"context"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Acquired starts the weeding of partition p's namespaces, as fits how the partition came here:
//   - Handover: the windows the previous holder had open resume for their remaining time (at most
//     watchDuration), and a real window opens for each readiness change the handover's gap may have
//     hidden (handoverMissed);
//   - Resume (this process re-took its own partition after a fence): the windows it kept at the
//     fence resume for their remaining time, and a real window opens for each readiness change the
//     fence may have hidden (missedWindows), but none for the other ready services;
//   - Crash or Fresh: a synthetic window opens for every service that is ready now, as the original
//     does on a restart.
func (m *Manager) Acquired(_ context.Context, p int, takeover sharding.Takeover) {
	kept, stoppedAt := m.takeKept(p)
	switch takeover.Cause {
	case sharding.Handover:
		m.resumeHanded(p, m.handedOver(p, takeover))
	case sharding.Resume:
		// A Resume carries the state of a release whose write failed, if any: those windows resume too.
		m.resumeOwn(p, append(kept, m.handedOver(p, takeover)...), stoppedAt)
	default:
		m.openSynthetic(p, takeover.Cause)
	}
}

// takeKept returns and forgets what Released kept of partition p: its windows not handed over and
// when its work stopped (zero if it never ran here).
func (m *Manager) takeKept(p int) ([]Window, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kept, stoppedAt := m.handover[p], m.stoppedAt[p]
	delete(m.handover, p)
	delete(m.stoppedAt, p)
	return kept, stoppedAt
}

// handedOver returns the windows that came in the partition lease's handover annotation, none
// ending later than watchDuration from now.
func (m *Manager) handedOver(p int, takeover sharding.Takeover) []Window {
	state := takeover.State[HandoverKey]
	if state == "" {
		return nil
	}
	windows, err := decodeWindows(state)
	if err != nil {
		m.Log.Error(err, "Ignoring unreadable weeding windows handed over", "partition", p)
		return nil
	}
	limit := m.Clock.Now().Add(m.Config.WatchDuration.Duration)
	if clamped := clampDeadlines(windows, limit); clamped > 0 {
		m.Log.Info("Shortened weeding windows handed over with deadlines beyond the watch duration", "partition", p,
			"windows", clamped, "until", limit)
	}
	return windows
}

// resumeHanded starts the weeding of partition p after a graceful handover: the windows handed over,
// and a window for each readiness change the handover's gap may have hidden.
func (m *Manager) resumeHanded(p int, handed []Window) {
	missed := handoverMissed(handed, m.readyServices(p), m.Clock.Now(), m.Config.WatchDuration.Duration)
	resumed := m.openAll(p, handed)
	opened := m.openAll(p, missed)
	m.Log.V(1).Info("Acquired partition by a graceful handover: resumed its weeding windows", "partition", p,
		"windows", resumed, "missedReadinessChanges", opened)
}

// openAll opens those of windows that belong to partition p, are of a configured service and have
// time left, in order; it returns how many it opened.
func (m *Manager) openAll(p int, windows []Window) int {
	now, opened := m.Clock.Now(), 0
	for _, w := range windows {
		_, configured := m.selectors[w.Key.Service]
		if configured && w.Deadline.After(now) && m.Ownership.Partition(w.Key.Namespace) == p && m.open(w, false) {
			opened++
		}
	}
	return opened
}

// resumeOwn restarts the weeding of partition p after a fence: the windows kept then, and a window for
// each readiness change the fence may have hidden.
func (m *Manager) resumeOwn(p int, kept []Window, stoppedAt time.Time) {
	now := m.Clock.Now()
	if stoppedAt.IsZero() { // not stopped here: count only the changes whose window would still run
		stoppedAt = now
	}
	missed := missedWindows(kept, m.readyServices(p), stoppedAt, now, m.Config.WatchDuration.Duration)
	resumed := m.openAll(p, kept)
	opened := m.openAll(p, missed)
	m.Log.V(1).Info("Acquired partition again after a fence: resumed the weeding windows kept at the fence",
		"partition", p, "windows", resumed, "missedReadinessChanges", opened)
}

// openSynthetic opens a synthetic window for every configured service that is ready in partition
// p's namespaces.
func (m *Manager) openSynthetic(p int, cause sharding.TakeoverCause) {
	deadline := m.Clock.Now().Add(m.Config.WatchDuration.Duration)
	opened := 0
	for _, s := range m.readyServices(p) {
		if m.open(Window{Key: s.Key, Deadline: deadline, Synthetic: true}, false) {
			opened++
		}
	}
	if opened > 0 {
		m.Log.V(1).Info("Acquired partition after a crash or at start: opened weeding windows for ready services",
			"partition", p, "cause", cause.String(), "windows", opened)
	}
}

// readyServices returns the configured services that are ready in partition p's namespaces, with
// when each turned ready.
func (m *Manager) readyServices(p int) []readyService {
	var ready []readyService
	for _, ns := range m.namespaces(p) {
		for _, service := range m.tracker.ReadyServices(ns) {
			key := ServiceKey{Namespace: ns, Service: service}
			_, configured := m.selectors[service]
			if since, ok := m.tracker.ReadySince(key); configured && ok {
				ready = append(ready, readyService{Key: key, Since: since})
			}
		}
	}
	return ready
}

// Released ends the windows of partition p's namespaces and keeps them, for HandoverState or for a
// Resume, with the moment their work stopped.
func (m *Manager) Released(p int) {
	m.mu.Lock()
	now := m.Clock.Now()
	windows := m.registry.InNamespaces(func(ns string) bool { return m.Ownership.Partition(ns) == p })
	keys := make([]ServiceKey, 0, len(windows))
	for _, w := range windows {
		keys = append(keys, w.Key)
	}
	started := m.registry.Close(now, keys...)
	stopping := m.detachLocked(keys...)
	if len(windows) > 0 {
		m.handover[p] = windows
	}
	m.stoppedAt[p] = now
	m.startLocked(started)
	m.mu.Unlock()
	stopRuns(stopping)
}

// HandoverState hands the windows of a released partition to its next holder, once: they are
// forgotten here.
func (m *Manager) HandoverState(p int) (string, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	windows := m.handover[p]
	delete(m.handover, p)
	if len(windows) == 0 {
		return HandoverKey, ""
	}
	return HandoverKey, encodeWindows(windows)
}

// OnAdd, OnUpdate and OnDelete receive the EndpointSlices of the configured services.
func (m *Manager) OnAdd(obj any, initial bool) { m.observe(obj, initial) }

// OnUpdate also opens a synthetic window for a service that is ready and whose slice changed
// unseen (changedUnseen): its readiness may have flapped while the cache was listing. The service
// counts as turned ready then (Tracker.TurnedReadyUnseen): a replica that does not own the namespace
// now opens the window when it resumes or takes the partition over.
func (m *Manager) OnUpdate(oldObj, obj any) {
	key, turnedReady := m.observe(obj, false)
	if turnedReady || !changedUnseen(sliceOf(oldObj), sliceOf(obj)) {
		return
	}
	if _, configured := m.selectors[key.Service]; !configured || !m.tracker.Ready(key) {
		return
	}
	now := m.Clock.Now()
	m.tracker.TurnedReadyUnseen(key, now)
	if m.open(Window{Key: key, Deadline: now.Add(m.Config.WatchDuration.Duration), Synthetic: true}, false) {
		m.Log.Info("A ready service's EndpointSlice changed while the cache was listing, unseen: its weeding window opens as at a restart (synthetic), or goes on",
			"namespace", key.Namespace, "service", key.Service, "slice", sliceOf(obj).Name)
	}
}

func (m *Manager) OnDelete(obj any) {
	if slice := sliceOf(obj); slice != nil {
		m.tracker.Forget(slice)
	}
}

// observe tracks a slice and opens the service's window when it turned ready in an owned namespace.
// A slice of the informer's initial list was ready before this process saw it: its service counts
// as ready since an unknown time (the zero time), not as a readiness change a fence could have hidden.
func (m *Manager) observe(obj any, initial bool) (ServiceKey, bool) {
	slice := sliceOf(obj)
	if slice == nil {
		return ServiceKey{}, false
	}
	now := m.Clock.Now()
	since := now
	if initial {
		since = time.Time{}
	}
	key, turnedReady := m.tracker.Observe(slice, since)
	if _, configured := m.selectors[key.Service]; turnedReady && configured {
		m.open(Window{Key: key, Deadline: now.Add(m.Config.WatchDuration.Duration)}, true)
	}
	return key, turnedReady
}

// ListedAnnotation marks a cached EndpointSlice whose state came from a list, not a watch event
// (the replica's sharded caches put it there: shardcache.Options.ListedAnnotation). A watch sends
// every change; a list only the state at its end.
const ListedAnnotation = "weeder.dwd/listed"

// changedUnseen reports whether a slice is ready now, came from a list, and changed since the state
// before it: between the two the cache did not watch (a relist after its watch ended, seconds), so
// the slice may have gone unready and ready again there, a readiness change no event showed.
func changedUnseen(old, slice *discoveryv1.EndpointSlice) bool {
	return old != nil && slice != nil && slice.Annotations[ListedAnnotation] != "" &&
		old.ResourceVersion != slice.ResourceVersion && sliceReady(slice)
}

func sliceOf(obj any) *discoveryv1.EndpointSlice {
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		return o
	case cache.DeletedFinalStateUnknown:
		return sliceOf(o.Obj)
	}
	return nil
}
