package prober

import (
	"context"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// dependentMarks is the caches' view of which configured dependents exist in each namespace and
// which of them carry the meltdown marker (scaler.MeltdownProtectionAnnotation), kept by an event
// handler on each dependent informer. It lets the scaled-down metrics answer a scrape from a map
// instead of a list of the caches. Its lock guards the map only and is never held for anything else.
type dependentMarks struct {
	mu sync.Mutex
	// byNS maps a namespace to its dependents present in the caches, each to whether it is marked.
	byNS map[string]map[dependentKey]bool
	// regs are the handlers' registrations, added before the caches start.
	regs []toolscache.ResourceEventHandlerRegistration
}

// follow keeps the marks of key's dependents from informer's events; call it before the cache starts.
func (m *dependentMarks) follow(informer cache.Informer, key dependentKey) error {
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.set(key, obj) },
		UpdateFunc: func(_, obj any) { m.set(key, obj) },
		DeleteFunc: func(obj any) { m.remove(key, obj) },
	})
	if err != nil {
		return err
	}
	m.regs = append(m.regs, reg)
	return nil
}

func (m *dependentMarks) set(key dependentKey, obj any) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	_, marked := o.GetAnnotations()[scaler.MeltdownProtectionAnnotation]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byNS == nil {
		m.byNS = map[string]map[dependentKey]bool{}
	}
	deps := m.byNS[o.GetNamespace()]
	if deps == nil {
		deps = map[dependentKey]bool{}
		m.byNS[o.GetNamespace()] = deps
	}
	deps[key] = marked
}

func (m *dependentMarks) remove(key dependentKey, obj any) {
	ns, ok := namespaceOf(obj)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byNS[ns], key)
	if len(m.byNS[ns]) == 0 {
		delete(m.byNS, ns)
	}
}

// namespaceOf is the namespace of a deleted object, also when the informer missed the delete and
// hands over only its key.
func namespaceOf(obj any) (string, bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		ns, _, err := toolscache.SplitMetaNamespaceKey(tomb.Key)
		return ns, err == nil
	}
	o, ok := obj.(client.Object)
	if !ok {
		return "", false
	}
	return o.GetNamespace(), true
}

// shoots returns every namespace with a configured dependent, each mapped to whether one of its
// dependents carries the meltdown marker.
func (m *dependentMarks) shoots() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]bool, len(m.byNS))
	for ns, deps := range m.byNS {
		for _, marked := range deps {
			out[ns] = out[ns] || marked
		}
	}
	return out
}

// waitForSync waits until every handler has seen the first list of its informer (which implies the
// caches synced), or ctx ends; it reports whether they have.
func (m *dependentMarks) waitForSync(ctx context.Context) bool {
	synced := make([]toolscache.InformerSynced, 0, len(m.regs))
	for _, reg := range m.regs {
		synced = append(synced, reg.HasSynced)
	}
	return toolscache.WaitForCacheSync(ctx.Done(), synced...)
}
