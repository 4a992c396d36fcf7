package weeder

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Acquired starts the weeding of partition p's namespaces. After a graceful handover it resumes the
// windows the previous holder had open, for their remaining time; after a crash (or when the group
// starts) it opens windows for the services that are ready now, as the original does on a restart.
func (m *Manager) Acquired(_ context.Context, p int, takeover sharding.Takeover) {
	m.mu.Lock()
	delete(m.handover, p)
	m.mu.Unlock()
	now := m.Clock.Now()
	if takeover.Cause == sharding.Handover {
		m.resume(p, takeover.State[HandoverKey])
		return
	}
	opened := 0
	for _, ns := range m.namespaces(p) {
		for _, service := range m.tracker.ReadyServices(ns) {
			if _, configured := m.selectors[service]; configured && m.open(ServiceKey{Namespace: ns, Service: service}, now.Add(m.Config.WatchDuration.Duration)) {
				opened++
			}
		}
	}
	if opened > 0 {
		m.Log.Info("Acquired partition after a crash or at start: opened weeding windows for ready services",
			"partition", p, "cause", takeover.Cause.String(), "windows", opened)
	}
}

// resume reopens the windows handed over with a partition that have time left.
func (m *Manager) resume(p int, state string) {
	if state == "" {
		return
	}
	windows, err := decodeWindows(state)
	if err != nil {
		m.Log.Error(err, "Ignoring unreadable weeding windows handed over", "partition", p)
		return
	}
	now, resumed := m.Clock.Now(), 0
	for _, w := range windows {
		_, configured := m.selectors[w.Key.Service]
		if configured && w.Deadline.After(now) && m.Ownership.Partition(w.Key.Namespace) == p && m.open(w.Key, w.Deadline) {
			resumed++
		}
	}
	m.Log.Info("Acquired partition by a graceful handover: resumed its weeding windows", "partition", p, "windows", resumed)
}

// Released ends the windows of partition p's namespaces and keeps them for HandoverState.
func (m *Manager) Released(p int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	windows := m.registry.InNamespaces(func(ns string) bool { return m.Ownership.Partition(ns) == p })
	keys := make([]ServiceKey, 0, len(windows))
	for _, w := range windows {
		keys = append(keys, w.Key)
	}
	started := m.registry.Close(keys...)
	for _, key := range keys {
		m.stopLocked(key)
	}
	if len(windows) > 0 {
		m.handover[p] = windows
	}
	m.startLocked(started)
}

// HandoverState hands the windows of a released partition to its next holder.
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
func (m *Manager) OnAdd(obj any, _ bool) { m.observe(obj) }

func (m *Manager) OnUpdate(_, obj any) { m.observe(obj) }

func (m *Manager) OnDelete(obj any) {
	if slice := sliceOf(obj); slice != nil {
		m.tracker.Forget(slice)
	}
}

// observe tracks a slice and opens the service's window when it turned ready in an owned namespace.
func (m *Manager) observe(obj any) {
	slice := sliceOf(obj)
	if slice == nil {
		return
	}
	key, turnedReady := m.tracker.Observe(slice)
	if _, configured := m.selectors[key.Service]; turnedReady && configured {
		m.open(key, m.Clock.Now().Add(m.Config.WatchDuration.Duration))
	}
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
