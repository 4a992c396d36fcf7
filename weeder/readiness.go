package weeder

import (
	"slices"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// ServiceKey names a Service in a namespace.
type ServiceKey struct {
	Namespace, Service string
}

// Tracker tells from EndpointSlices whether a service is ready: ready when at least one endpoint
// across all of the service's slices is ready, not ready when none is (an empty slice contributes
// nothing). An endpoint whose ready condition is unset counts as ready, because the
// discovery.k8s.io/v1 API asks consumers to interpret an unknown state as ready.
//
// A service that is not tracked is not ready: a service first seen ready has turned ready, and so
// has a service recreated ready after all of its slices were deleted. No tombstone is kept. (After a
// restart every ready service is first seen ready: the caller bounds that burst with the Registry's
// cap, or skips the informer's initial list.)
//
// Per service the Tracker keeps only the readiness of each slice by name, nothing per endpoint, and
// when the service last turned ready (ReadySince), so that a replica that was fenced can tell which
// readiness changes it missed. It is safe for concurrent use: informer event handlers feed it while others read it.
type Tracker struct {
	mu sync.RWMutex
	// namespaces maps a namespace to its tracked services, so that a partition's takeover looks up
	// its namespaces' services without walking the whole seed's.
	namespaces map[string]map[string]*serviceState
	count      int // tracked services
}

// serviceState is what the Tracker knows of one service.
type serviceState struct {
	slices map[string]bool // whether each slice, by name, has a ready endpoint
	since  time.Time       // when the service last turned ready
}

// ready reports whether any slice has a ready endpoint.
func (s *serviceState) ready() bool {
	if s == nil {
		return false
	}
	for _, ready := range s.slices {
		if ready {
			return true
		}
	}
	return false
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{namespaces: map[string]map[string]*serviceState{}}
}

// Observe records an added or updated slice, seen at now, and reports whether its service just
// turned ready: it was not ready (or not tracked) before and is ready now. A slice without the
// kubernetes.io/service-name label is ignored and yields the zero key.
func (t *Tracker) Observe(slice *discoveryv1.EndpointSlice, now time.Time) (key ServiceKey, turnedReady bool) {
	key, ok := keyOf(slice)
	if !ok {
		return ServiceKey{}, false
	}
	ready := sliceReady(slice)
	t.mu.Lock()
	defer t.mu.Unlock()
	state := t.stateLocked(key)
	before := state.ready()
	if old, known := state.slices[slice.Name]; !known || old != ready {
		state.slices[strings.Clone(slice.Name)] = ready
	}
	if !before && ready {
		state.since = now
	}
	return key, !before && ready
}

// TurnedReadyUnseen records that key's service, ready now, may have turned ready at now without a
// change seen (a list gave a changed slice): ReadySince says now from then on, so that a replica that
// did not own the namespace then opens the window when it resumes or takes the partition over. It
// does nothing for a service that is not ready.
func (t *Tracker) TurnedReadyUnseen(key ServiceKey, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if state := t.namespaces[key.Namespace][key.Service]; state.ready() {
		state.since = now
	}
}

// stateLocked returns the state of key's service, tracking it if it was not; t.mu must be held.
func (t *Tracker) stateLocked(key ServiceKey) *serviceState {
	services, known := t.namespaces[key.Namespace]
	if !known {
		services = map[string]*serviceState{}
		t.namespaces[strings.Clone(key.Namespace)] = services
	}
	state, tracked := services[key.Service]
	if !tracked {
		state = &serviceState{slices: map[string]bool{}}
		services[strings.Clone(key.Service)] = state
		t.count++
	}
	return state
}

// Forget records a deleted slice and returns its service's key (the zero key for a slice without
// the service-name label). A delete never turns a service ready; it may turn it not ready. The
// service is dropped from memory with its last slice.
func (t *Tracker) Forget(slice *discoveryv1.EndpointSlice) ServiceKey {
	key, ok := keyOf(slice)
	if !ok {
		return ServiceKey{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	services := t.namespaces[key.Namespace]
	if state, tracked := services[key.Service]; tracked {
		delete(state.slices, slice.Name)
		if len(state.slices) == 0 {
			delete(services, key.Service)
			t.count--
		}
		if len(services) == 0 {
			delete(t.namespaces, key.Namespace)
		}
	}
	return key
}

// Ready reports whether the service is ready; an untracked service is not.
func (t *Tracker) Ready(key ServiceKey) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.namespaces[key.Namespace][key.Service].ready()
}

// ReadySince returns when the service last turned ready (was first seen ready, or turned from not
// ready to ready), and false when it is not ready.
func (t *Tracker) ReadySince(key ServiceKey) (time.Time, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	state := t.namespaces[key.Namespace][key.Service]
	if !state.ready() {
		return time.Time{}, false
	}
	return state.since, true
}

// ReadyServices returns the sorted names of the ready services in namespace.
func (t *Tracker) ReadyServices(namespace string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var names []string
	for service, state := range t.namespaces[namespace] {
		if state.ready() {
			names = append(names, service)
		}
	}
	slices.Sort(names)
	return names
}

// Len returns the number of tracked services (those with at least one slice).
func (t *Tracker) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.count
}

// keyOf returns the service a slice belongs to, or false when the slice has no service-name label.
func keyOf(slice *discoveryv1.EndpointSlice) (ServiceKey, bool) {
	if slice == nil {
		return ServiceKey{}, false
	}
	service := slice.Labels[discoveryv1.LabelServiceName]
	if service == "" {
		return ServiceKey{}, false
	}
	return ServiceKey{Namespace: slice.Namespace, Service: service}, true
}

// sliceReady reports whether any endpoint of the slice is ready; a nil ready condition counts as
// ready (the API defines unknown as ready).
func sliceReady(slice *discoveryv1.EndpointSlice) bool {
	for i := range slice.Endpoints {
		if ready := slice.Endpoints[i].Conditions.Ready; ready == nil || *ready {
			return true
		}
	}
	return false
}
