package sharding

import (
	"context"
	"errors"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// memberConn is one simulated member's connection to the store: every call fails while the member
// is cut off, and writes fail now and then.
type memberConn struct {
	sim  *simulation
	node *simNode
}

var errCutOff = errors.New("connection refused: member cut off from the store")

func (c memberConn) Get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	if c.node.cutOff {
		return nil, errCutOff
	}
	return c.sim.store.Get(ctx, name)
}

func (c memberConn) Create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if err := c.sim.writeFault(c.node); err != nil {
		return nil, err
	}
	return c.sim.store.Create(ctx, l)
}

func (c memberConn) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if err := c.sim.writeFault(c.node); err != nil {
		return nil, err
	}
	return c.sim.store.Update(ctx, l)
}

func (c memberConn) Delete(ctx context.Context, name, resourceVersion string) error {
	if err := c.sim.writeFault(c.node); err != nil {
		return err
	}
	return c.sim.store.Delete(ctx, name, resourceVersion)
}

// cacheView is one member's cache of the store: it replays the store's writes up to a point in time.
type cacheView struct {
	store   *leasestest.Store
	applied int
	objects map[string]*coordinationv1.Lease
}

func newCacheView(store *leasestest.Store) *cacheView {
	return &cacheView{store: store, objects: map[string]*coordinationv1.Lease{}}
}

// catchUp applies the writes made up to until; it reports whether anything changed.
func (v *cacheView) catchUp(until time.Time) bool {
	changed := false
	for _, e := range v.store.Events(v.applied) {
		if e.At.After(until) {
			break
		}
		if e.Deleted {
			delete(v.objects, e.Lease.Name)
		} else {
			v.objects[e.Lease.Name] = e.Lease
		}
		v.applied++
		changed = true
	}
	return changed
}

// List returns the cached Leases in name order.
func (v *cacheView) List() []*coordinationv1.Lease {
	return leasestest.InNameOrder(v.objects)
}
