package prober

import (
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// MachineChanges tells, per namespace, whether the seed cache's Machines changed since a moment, so
// that a probe lists a shoot's Machines from the cache only after one of them did (a steady probe
// otherwise lists them every cycle). An event handler on the Machine informer keeps it; the store has
// the change before the handler hears of it, so a list made after reading a generation shows at least
// what that generation stands for.
type MachineChanges struct {
	reg toolscache.ResourceEventHandlerRegistration

	mu sync.Mutex
	// last numbers the events: each one of a namespace gives it the next number, so that a namespace
	// whose Machines are all deleted and created again never shows a generation it showed before.
	last uint64
	byNS map[string]machineGeneration
}

type machineGeneration struct {
	// gen is the number of the namespace's last event; count is how many Machines it has.
	gen   uint64
	count int
}

// FollowMachines keeps a MachineChanges from informer's events; call it before the cache starts.
func FollowMachines(informer cache.Informer) (*MachineChanges, error) {
	c := &MachineChanges{byNS: map[string]machineGeneration{}}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.changed(obj, 1) },
		UpdateFunc: func(_, obj any) { c.changed(obj, 0) },
		DeleteFunc: func(obj any) { c.changed(obj, -1) },
	})
	if err != nil {
		return nil, err
	}
	c.reg = reg
	return c, nil
}

func (c *MachineChanges) changed(obj any, delta int) {
	ns, ok := namespaceOf(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last++
	g := c.byNS[ns]
	g.gen, g.count = c.last, g.count+delta
	if g.count <= 0 {
		delete(c.byNS, ns) // no Machines: generation 0, which no event gives
		return
	}
	c.byNS[ns] = g
}

// Generation returns the generation of namespace's Machines: equal for two reads only when no Machine
// of it changed between them. ok is false on a nil MachineChanges and until the handler has seen the
// informer's first list; nothing may be kept on it then.
func (c *MachineChanges) Generation(namespace string) (gen uint64, ok bool) {
	if c == nil || !c.reg.HasSynced() {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byNS[namespace].gen, true
}
