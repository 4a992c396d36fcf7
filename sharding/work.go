package sharding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// release stops the work of partition p if it runs here, then clears the lease's holder by
// compare-and-swap on the newest copy this replica has: its own last write, else the cached one.
func (c *Coordinator) release(ctx context.Context, p int, cached *coordinationv1.Lease) error {
	var handover map[string]string
	if own, ok := c.stop(p); ok {
		cached, handover = own, c.handoverState(p)
	}
	if cached == nil || leases.Holder(cached) != c.cfg.Member {
		return nil
	}
	_, err := leases.Release(ctx, c.store, cached, handover, c.clock.Now())
	c.metrics.write("release", err)
	if err != nil && !isLostRace(err) {
		return fmt.Errorf("releasing partition %d: %w", p, err)
	}
	c.log.V(1).Info("Released partition", "partition", p, "lostRace", err != nil)
	return nil
}

// acquire writes this member into partition p's lease and starts its work once the write succeeded.
// A lease held by another member is taken only when a fresh read confirms that the holder's member
// lease is still the one observed unchanged for a full lease duration: a lagging cache must not make
// a live member look expired.
func (c *Coordinator) acquire(ctx context.Context, p int, cached *coordinationv1.Lease, now time.Time, confirm *expiryConfirmer, epoch uint64) error {
	holder := leases.Holder(cached)
	if holder != "" && holder != c.cfg.Member {
		expired, err := confirm.expired(ctx, holder)
		if err != nil || !expired {
			return err
		}
	}
	takeover := c.takeover(cached, holder)
	lease, err := leases.Acquire(ctx, c.store, c.cfg.Group, p, cached, c.cfg.Member, c.cfg.Incarnation, now)
	c.metrics.write("acquire", err)
	if isLostRace(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("acquiring partition %d: %w", p, err)
	}
	if !c.start(p, lease, takeover, epoch) {
		return nil
	}
	c.observeHandover(cached, holder, now)
	return nil
}

// expiryConfirmer confirms, once per holder and reconcile step, that a holder judged expired by
// observation really is: a lagging cache must not make a live member look expired.
type expiryConfirmer struct {
	c       *Coordinator
	mu      sync.Mutex
	results map[string]bool
}

func (c *Coordinator) newExpiryConfirmer() *expiryConfirmer {
	return &expiryConfirmer{c: c, results: map[string]bool{}}
}

// expired reads holder's member lease afresh: expired when it is gone, released, or still the version
// this replica observed unchanged for the lease duration. Errors are not remembered.
func (e *expiryConfirmer) expired(ctx context.Context, holder string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if expired, ok := e.results[holder]; ok {
		return expired, nil
	}
	fresh, err := e.c.store.Get(ctx, leases.MemberLeaseName(e.c.cfg.Group, holder))
	switch {
	case err == nil:
		e.results[holder] = leases.Holder(fresh) != holder || e.c.observer.Unchanged(holder, fresh.ResourceVersion)
	case isLostRace(err):
		e.results[holder] = true
	default:
		return false, fmt.Errorf("reading member lease of %s: %w", holder, err)
	}
	return e.results[holder], nil
}

// takeover tells the handlers how the partition whose lease was cached comes here.
func (c *Coordinator) takeover(cached *coordinationv1.Lease, holder string) Takeover {
	switch {
	case cached == nil:
		return Takeover{Cause: Fresh}
	case holder == "":
		if _, released := leases.ReleasedAt(cached); released {
			return Takeover{Cause: Handover, State: leases.Handover(cached)}
		}
		return Takeover{Cause: Fresh}
	case holder != c.cfg.Member:
		if _, held, ok := c.observer.Seen(holder); ok && !held {
			return Takeover{Cause: Handover}
		}
	case leases.Incarnation(cached) == c.cfg.Incarnation:
		return Takeover{Cause: Resume}
	}
	return Takeover{Cause: Crash}
}

// handoverState collects what the handlers hand over for partition p, after its Released.
func (c *Coordinator) handoverState(p int) map[string]string {
	var state map[string]string
	for _, h := range c.handlers {
		sh, ok := h.(StateHandler)
		if !ok {
			continue
		}
		if k, v := sh.HandoverState(p); v != "" {
			if state == nil {
				state = map[string]string{}
			}
			state[k] = v
		}
	}
	return state
}

// observeHandover records how long a partition was without a working holder: since its release, or
// since its holder left the group (cause "release"), or since the holder's last observed renewal when
// its lease expired (cause "expiry").
func (c *Coordinator) observeHandover(cached *coordinationv1.Lease, holder string, now time.Time) {
	if cached == nil || holder == c.cfg.Member {
		return
	}
	if holder == "" {
		if at, ok := leases.ReleasedAt(cached); ok {
			c.metrics.handover.WithLabelValues("release").Observe(max(now.Sub(at), 0).Seconds())
		}
		return
	}
	since, held, ok := c.observer.Seen(holder)
	if !ok {
		return
	}
	cause := "expiry"
	if !held {
		cause = "release"
	}
	c.metrics.handover.WithLabelValues(cause).Observe(now.Sub(since).Seconds())
}

// start runs the handlers' Acquired for partition p unless the replica is fenced now or has been
// since the reconcile that wrote the lease began (epoch): a reply that arrives after a fence and a
// later renewal must not start work the next holder may already be doing.
func (c *Coordinator) start(p int, lease *coordinationv1.Lease, takeover Takeover, epoch uint64) bool {
	c.partitions[p].Lock()
	defer c.partitions[p].Unlock()
	if c.fences.Load() != epoch || c.liveness.Fenced(c.clock.Now()) {
		return false
	}
	ctx, cancel := context.WithCancel(c.workCtx)
	c.mu.Lock()
	c.held[p] = &heldPartition{lease: lease, cancel: cancel}
	c.mu.Unlock()
	c.heldChanges.Add(1)
	for _, h := range c.handlers {
		h.Acquired(ctx, p, takeover)
	}
	return true
}

// stop ends the work of partition p and waits for it; it returns this process's last write of the
// partition's lease, and false when no work ran here.
func (c *Coordinator) stop(p int) (*coordinationv1.Lease, bool) {
	c.partitions[p].Lock()
	defer c.partitions[p].Unlock()
	c.mu.Lock()
	hp, ok := c.held[p]
	delete(c.held, p)
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	c.heldChanges.Add(1)
	hp.cancel()
	for _, h := range c.handlers {
		h.Released(p)
	}
	return hp.lease, true
}

// Fence stops the work of every partition at once and returns when all of it has stopped. The member
// lease calls it when the renew deadline passes; the leases stay as they are, and the partitions are
// confirmed by a fresh write before any work resumes.
func (c *Coordinator) Fence() {
	c.fences.Add(1)
	if held := c.Held(); len(held) > 0 {
		c.log.Info("Fenced: stopping the work of every partition", "partitions", len(held))
	}
	// Every partition is visited, not only those held now: a start racing with the fence either
	// finished before the visit, and is stopped, or sees the fence and starts nothing.
	var wg sync.WaitGroup
	for p := range c.partitions {
		wg.Go(func() { c.stop(p) })
	}
	wg.Wait()
	c.updateMetrics()
}

// Leave stops the work of every partition, for a graceful shutdown, and hands over the state of
// those whose handlers have any by releasing their leases with it, WriteConcurrency partitions at a
// time. The other partitions' leases are left naming this member: once its member lease is released
// (the caller's next step), the others take them over at once, and a write per partition is saved.
// Partitions not reached before ctx ends are stopped without handing their state over.
//
// From its start the replica owns no namespace (Owns is false): the work still running in the
// partitions not yet stopped may finish what it is doing but starts nothing new.
func (c *Coordinator) Leave(ctx context.Context) error {
	c.leaving.Store(true)
	errs := c.forEach(ctx, c.Held(), func(p int) error {
		own, ok := c.stop(p)
		state := c.handoverState(p)
		if !ok || len(state) == 0 {
			return nil
		}
		_, err := leases.Release(ctx, c.store, own, state, c.clock.Now())
		c.metrics.write("release", err)
		if err != nil {
			return fmt.Errorf("handing over partition %d: %w", p, err)
		}
		return nil
	})
	c.Fence()
	return errors.Join(errs...)
}

// forEach runs fn for every partition, WriteConcurrency at a time, in order when that is 1.
func (c *Coordinator) forEach(ctx context.Context, parts []int, fn func(p int) error) []error {
	var mu sync.Mutex
	var errs []error
	collect := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	if c.cfg.WriteConcurrency <= 1 {
		for _, p := range parts {
			collect(fn(p))
		}
		return errs
	}
	sem := make(chan struct{}, c.cfg.WriteConcurrency)
	var wg sync.WaitGroup
	for _, p := range parts {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			collect(fn(p))
		})
	}
	wg.Wait()
	return errs
}
