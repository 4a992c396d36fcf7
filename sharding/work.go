package sharding

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// release stops the work of partition p if it runs here, then clears the lease's holder by
// compare-and-swap on the newest copy this replica has: its own last write, else the cached one. The
// handover state goes with the write, and is kept for a retry until a write succeeds. With
// reservedFor set, the partition waits for that member.
func (c *Coordinator) release(ctx context.Context, p int, cached *coordinationv1.Lease, reservedFor string) error {
	if c.broken.releaseBeforeStop && c.Holds(p) {
		c.mu.RLock()
		own := c.held[p].lease
		c.mu.RUnlock()
		_, err := leases.Release(ctx, c.store, own, nil, reservedFor, c.clock.Now())
		c.stop(p, ReleaseHandover)
		return err
	}
	if own, ok := c.stop(p, ReleaseHandover); ok {
		cached = own
		c.rebalance.releasedOne()
	}
	if cached == nil || leases.Holder(cached) != c.cfg.Member || c.releasedAlready(p, cached) {
		return nil
	}
	if leases.Incarnation(cached) != c.cfg.Incarnation && !c.broken.resumeUnproven {
		// An earlier process under this name holds it: releasing it lets another member start it at
		// once, so it waits as a resumption would (see acquire).
		if until := c.liveness.PredecessorFencedBy(); c.clock.Now().Before(until) {
			c.waitForPredecessor(until)
			return nil
		}
	}
	c.mu.Lock()
	delete(c.fenced, p)
	c.mu.Unlock()
	state := c.takePending(p)
	_, err := leases.Release(ctx, c.store, cached, state, reservedFor, c.clock.Now())
	c.metrics.write("release", err)
	if err != nil && !isLostRace(err) {
		c.putPending(p, state)
		return fmt.Errorf("releasing partition %d: %w", p, err)
	}
	if err == nil {
		c.mu.Lock()
		c.releasedFrom[p] = cached.ResourceVersion
		c.mu.Unlock()
	}
	c.log.V(1).Info("Released partition", "partition", p, "lostRace", err != nil, "reservedFor", reservedFor)
	return nil
}

// releasedAlready reports whether this replica's release of partition p replaced cached, the copy
// its cache still shows: sent again on it, the release could only fail its precondition
// (docs/sharding.md, "Release to nobody").
// A version names one state of the lease, so the entry needs no clearing: at most one per partition.
func (c *Coordinator) releasedAlready(p int, cached *coordinationv1.Lease) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	from, ok := c.releasedFrom[p]
	return ok && from == cached.ResourceVersion
}

// releaseVanished marks the lease of partition p, which vanished under this member's name (holder v,
// see findVanished) while the ring wants another owner, released with its state lost, once the work
// has stopped here and, for an earlier process under this name, once that one is fenced for sure.
func (c *Coordinator) releaseVanished(ctx context.Context, p int, cached *coordinationv1.Lease, v holderID) error {
	c.stop(p, ReleaseLost)
	if v.incarnation != c.cfg.Incarnation {
		if until := c.liveness.PredecessorFencedBy(); c.clock.Now().Before(until) {
			c.waitForPredecessor(until)
			return nil
		}
	}
	_, err := leases.ReleaseVanished(ctx, c.store, c.cfg.Group, c.cfg.Ring.PartitionCount, p, cached, c.clock.Now())
	c.metrics.write("release", err)
	if err != nil && !isLostRace(err) {
		return fmt.Errorf("marking the vanished lease of partition %d released: %w", p, err)
	}
	c.log.V(1).Info("Marked a partition lease someone deleted or cleared released", "partition", p, "lostRace", err != nil)
	return nil
}

// takePending returns the handover state of partition p: what a failed release kept, else what the
// handlers hand over now.
func (c *Coordinator) takePending(p int) map[string]string {
	c.mu.Lock()
	state, ok := c.pending[p]
	delete(c.pending, p)
	c.mu.Unlock()
	if ok {
		return state
	}
	return c.handoverState(p)
}

func (c *Coordinator) putPending(p int, state map[string]string) {
	if len(state) == 0 {
		return
	}
	c.mu.Lock()
	c.pending[p] = state
	c.mu.Unlock()
}

// acquire writes this member into partition p's lease and starts its work once the write succeeded.
// A lease held by another member is taken only when a fresh read confirms that the holder's member
// lease is still the one observed unchanged for a full lease duration: a lagging cache must not make
// a live member look expired.
//
// A partition whose lease vanished under its holder (vanished, see findVanished) is taken from that
// holder in the same way, as after a crash.
func (c *Coordinator) acquire(ctx context.Context, p int, cached *coordinationv1.Lease, vanished holderID, now time.Time, confirm *expiryConfirmer, epoch uint64) error {
	holder, incarnation := leases.Holder(cached), leases.Incarnation(cached)
	if vanished.name != "" {
		holder, incarnation = vanished.name, vanished.incarnation
	}
	if holder != "" && holder != c.cfg.Member && !c.broken.skipConfirmation {
		expired, err := confirm.expired(ctx, holder)
		if err != nil || !expired {
			return err
		}
	}
	if holder == c.cfg.Member && incarnation != c.cfg.Incarnation && !c.broken.resumeUnproven {
		// A predecessor under this name holds it: it may act until it is fenced, which the member
		// lease proves unless someone deleted or cleared that.
		if until := c.liveness.PredecessorFencedBy(); now.Before(until) {
			c.waitForPredecessor(until)
			return nil
		}
	}
	takeover := c.takeover(p, cached, holder)
	if vanished.name != "" {
		takeover = Takeover{Cause: Crash}
	}
	if c.broken.resumeWithoutWrite && holder == c.cfg.Member {
		c.start(p, cached, cached, takeover, epoch)
		return nil
	}
	switch c.resumption(p, cached, incarnation) {
	case resumeLater:
		return nil
	case resumeWithoutWrite:
		if c.start(p, cached, cached, takeover, epoch) {
			c.rebalance.acquiredOne(takeover.Cause, "")
			c.rebalance.resumedWithoutWrite()
		}
		return nil
	}
	if c.broken.startBeforeWrite {
		c.start(p, cached, cached, takeover, epoch)
	}
	lease, err := leases.Acquire(ctx, c.store, c.cfg.Group, c.cfg.Ring.PartitionCount, p, cached, c.cfg.Member, c.cfg.Incarnation, now)
	c.metrics.write("acquire", err)
	if isLostRace(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("acquiring partition %d: %w", p, err)
	}
	if !c.start(p, lease, cached, takeover, epoch) {
		return nil
	}
	c.rebalance.acquiredOne(takeover.Cause, c.expiredHolder(takeover, holder))
	c.observeHandover(cached, holder, now)
	return nil
}

// resumption says how a partition whose work a fence stopped here starts again.
type resumption int

const (
	// resumeByWrite: by a compare-and-swap, as any acquire.
	resumeByWrite resumption = iota
	// resumeWithoutWrite: the lease is still this process's write, and nobody can have taken it.
	resumeWithoutWrite
	// resumeLater: the cache shows no renewal of the member lease sent after the fence yet, so it
	// may not show what happened to the lease meanwhile; its next event triggers the next step (or
	// the stale-view check holds every ring change back).
	resumeLater
)

// resumption says how partition p, whose lease is cached naming incarnation, starts again here. It
// starts without a write when a fence stopped its work here, the member lease has been held
// continuously since the partition's write (leases.Member.ContinuousSince), so that no other member
// can have judged this one expired and taken the partition, and the cache, which shows a renewal
// sent after the fence, still shows the version this process wrote: nobody deleted or wrote the lease
// up to that renewal, and a foreign write after it is one a holder without a fence meets as well
// (stopForeignWrites). After an outage of the API server shorter than the lease duration the group
// thus acts again at its first renewal, without a partition lease write.
func (c *Coordinator) resumption(p int, cached *coordinationv1.Lease, incarnation string) resumption {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.fenced[p]
	switch {
	case !ok || cached == nil || incarnation != c.cfg.Incarnation || leases.Holder(cached) != c.cfg.Member ||
		cached.ResourceVersion != f.version ||
		(!f.wroteAt.After(c.liveness.ContinuousSince()) && !c.broken.resumeDespiteGap):
		delete(c.fenced, p)
		return resumeByWrite
	case !c.shownRenewal.After(f.at):
		return resumeLater
	}
	delete(c.fenced, p)
	return resumeWithoutWrite
}

// waitForPredecessor logs, once, that partitions an earlier process under this name holds wait until
// it is fenced.
func (c *Coordinator) waitForPredecessor(until time.Time) {
	if c.predecessorLogged.CompareAndSwap(false, true) {
		c.log.Info("The member lease was deleted or cleared by someone else and taken without proof that the process before this one under the name stopped: its partitions resume once it is fenced for sure",
			"member", c.cfg.Member, "resumeAt", until)
	}
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

// expired reads holder's member lease afresh: expired when it is gone, says its member left for
// good, or is still the version this replica observed unchanged for the lease duration (or the grace
// of a returning member). Errors are not remembered.
func (e *expiryConfirmer) expired(ctx context.Context, holder string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if expired, ok := e.results[holder]; ok {
		return expired, nil
	}
	fresh, err := e.c.store.Get(ctx, leases.MemberLeaseName(e.c.cfg.Group, holder))
	switch {
	case err == nil:
		advert := leases.AdvertOf(holder, fresh)
		e.results[holder] = (advert.Left && advert.Returning == 0) || e.c.observer.Unchanged(holder, fresh.ResourceVersion)
	case isLostRace(err):
		// A deleted lease proves nothing until its absence has lasted a lease duration: its member
		// may act until its next renewal finds it gone.
		e.results[holder] = e.c.observer.AbsentFor(holder, e.c.clock.Now()) >= e.c.cfg.LeaseDuration
	default:
		return false, fmt.Errorf("reading member lease of %s: %w", holder, err)
	}
	return e.results[holder], nil
}

// takeover tells the handlers how the partition whose lease was cached comes here: a release (with
// the state it carries) or a clean leave is a handover, this process's own lease after a fence a
// resume (with any state a failed release kept), anything else a crash.
func (c *Coordinator) takeover(p int, cached *coordinationv1.Lease, holder string) Takeover {
	switch {
	case cached == nil:
		return Takeover{Cause: Fresh}
	case holder == "":
		if _, released := leases.ReleasedAt(cached); released && !leases.StateLost(cached) {
			return Takeover{Cause: Handover, State: leases.Handover(cached)}
		} else if released {
			return Takeover{Cause: Crash}
		}
		return Takeover{Cause: Fresh}
	case holder != c.cfg.Member:
		if _, advert, ok := c.observer.Seen(holder); ok && advert.Left && !advert.StateLost {
			return Takeover{Cause: Handover}
		}
	case leases.Incarnation(cached) == c.cfg.Incarnation:
		c.mu.Lock()
		state := c.pending[p]
		c.mu.Unlock()
		return Takeover{Cause: Resume, State: state}
	}
	return Takeover{Cause: Crash}
}

// expiredHolder returns the holder a partition taken over as a Crash came from when its member lease
// expired (this member's own name for an earlier process of it), and "" otherwise: a member that left
// without handing its state over did not crash.
func (c *Coordinator) expiredHolder(takeover Takeover, holder string) string {
	if takeover.Cause != Crash || holder == "" {
		return ""
	}
	if _, advert, ok := c.observer.Seen(holder); ok && advert.Left && holder != c.cfg.Member {
		return ""
	}
	return holder
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

// essential reports whether state holds anything but advisory state (see AdvisoryStateHandler), and
// so is worth a partition lease write of its own at a leave.
func (c *Coordinator) essential(state map[string]string) bool {
	advisory := map[string]bool{}
	for _, h := range c.handlers {
		if a, ok := h.(AdvisoryStateHandler); ok {
			advisory[a.AdvisoryStateKey()] = true
		}
	}
	for k := range state {
		if !advisory[k] {
			return true
		}
	}
	return false
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
	since, advert, ok := c.observer.Seen(holder)
	if !ok {
		return
	}
	cause := "expiry"
	if advert.Left {
		cause = "release"
	}
	c.metrics.handover.WithLabelValues(cause).Observe(now.Sub(since).Seconds())
}

// start runs the handlers' Acquired for partition p, whose lease this process wrote (replacing base),
// unless the replica is fenced now or has been since the reconcile that wrote the lease began (epoch):
// a reply that arrives after a fence and a later renewal must not start work the next holder may
// already be doing.
func (c *Coordinator) start(p int, lease, base *coordinationv1.Lease, takeover Takeover, epoch uint64) bool {
	c.partitions[p].Lock()
	defer c.partitions[p].Unlock()
	c.fenceMu.RLock()
	defer c.fenceMu.RUnlock()
	if (c.fences.Load() != epoch && !c.broken.noEpochCheck) || c.liveness.Fenced(c.clock.Now()) {
		return false
	}
	if takeover.Cause == Resume {
		c.mu.Lock()
		delete(c.pending, p)
		c.mu.Unlock()
	}
	// The acquire is on record before Guard can pass a write of the partition.
	if c.cfg.Audit != nil {
		c.cfg.Audit.Acquired(p, AcquireCause(takeover.Cause))
	}
	ctx, cancel := context.WithCancel(c.workCtx)
	c.mu.Lock()
	c.held[p] = &heldPartition{lease: lease, base: base, wroteAt: c.clock.Now(), cancel: cancel}
	c.mu.Unlock()
	c.heldChanges.Add(1)
	for _, h := range c.handlers {
		h.Acquired(ctx, p, takeover)
	}
	return true
}

// stop ends the work of partition p and waits for it; it returns this process's last write of the
// partition's lease, and false when no work ran here. cause goes into the audit.
func (c *Coordinator) stop(p int, cause string) (*coordinationv1.Lease, bool) {
	c.partitions[p].Lock()
	defer c.partitions[p].Unlock()
	c.mu.Lock()
	hp, ok := c.held[p]
	delete(c.held, p)
	if ok && cause == ReleaseFence {
		c.fenced[p] = fencedPartition{version: hp.lease.ResourceVersion, wroteAt: hp.wroteAt, at: c.clock.Now()}
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	c.heldChanges.Add(1)
	hp.cancel()
	for _, h := range c.handlers {
		h.Released(p)
	}
	if c.cfg.Audit != nil {
		c.cfg.Audit.Released(p, cause)
	}
	return hp.lease, true
}

// stopWorkers bounds the goroutines that stop partitions at once in a fence or a leave.
const stopWorkers = 8

// Fence stops the work of every partition and returns when all of it has stopped. The member lease
// loop calls it when the renew deadline passes; the leases stay as they are, and the partitions are
// confirmed by a fresh write before any work resumes. A start racing with the fence either recorded
// its partition before the fence listed the held ones, and is stopped, or sees the new epoch and
// starts nothing.
func (c *Coordinator) Fence() {
	began := time.Now()
	c.fenceMu.Lock()
	c.fences.Add(1)
	held := c.Held()
	c.fenceMu.Unlock()
	if len(held) > 0 {
		c.log.V(1).Info("Fenced: stopping the work of every partition", "partitions", len(held)) // the Runner logs the fence at info
	}
	c.forEachBounded(held, func(p int) { c.stop(p, ReleaseFence) })
	// Stops already under way elsewhere (a release, a foreign write) left the held set before this
	// listed it; each holds its partition's lock until it is done, so the fence waits for them too.
	for p := range c.partitions {
		c.partitions[p].Lock()
		c.partitions[p].Unlock() //nolint:staticcheck // an empty critical section: waiting is the point
	}
	c.metrics.fenceDuration.Observe(time.Since(began).Seconds())
	c.updateMetrics()
}

// forEachBounded runs fn for every partition, stopWorkers at a time.
func (c *Coordinator) forEachBounded(parts []int, fn func(p int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(stopWorkers, len(parts)) {
		wg.Go(func() {
			for p := range work {
				fn(p)
			}
		})
	}
	for _, p := range parts {
		work <- p
	}
	close(work)
	wg.Wait()
}

// Leave stops the work of every partition, for a graceful shutdown, and releases partition leases,
// WriteConcurrency at a time. A returning member (a restart) releases every partition reserved for
// itself, with its state; a departing one releases only those whose handlers have state to hand
// over, and leaves the others naming itself: once its member lease says it left, the others take
// them at once, and a write per partition is saved. stateLost reports partitions whose state could
// not be handed over: their next holders must start them as after a crash.
//
// From its start the replica owns no namespace (Owns is false): the work still running in the
// partitions not yet stopped may finish what it is doing but starts nothing new.
func (c *Coordinator) Leave(ctx context.Context, returning bool) (stateLost bool, err error) {
	if returning {
		return c.leave(ctx, true, c.cfg.Member)
	}
	return c.leave(ctx, false, "")
}

// LeaveForGood is Leave for a member that leaves the group for good: it releases every partition,
// so that no partition lease names it afterwards and its member lease may be deleted.
func (c *Coordinator) LeaveForGood(ctx context.Context) (stateLost bool, err error) {
	return c.leave(ctx, true, "")
}

// leave stops every partition and releases those with state, or all with releaseAll, reserved for
// reservedFor when that is set.
func (c *Coordinator) leave(ctx context.Context, releaseAll bool, reservedFor string) (stateLost bool, err error) {
	c.leaving.Store(true)
	var lost atomic.Bool
	var reached atomic.Int64
	cause := ReleaseLeave
	if reservedFor == c.cfg.Member {
		cause = ReleaseReturning
	}
	held := c.Held()
	// Partitions whose work stopped before the leave (at a fence, or a release that failed) still
	// name this process, and the handlers may keep their state: they are handed over as the held ones
	// are, or the next holder would take them as a clean handover without it (docs/sharding.md,
	// "Handover state survives a failed release").
	stopped := c.stoppedNamingMe()
	errs := c.forEach(ctx, append(held, slices.Sorted(maps.Keys(stopped))...), func(p int) error {
		reached.Add(1)
		own, ok := c.stop(p, cause)
		if !ok {
			own, ok = stopped[p]
		}
		state := c.takePending(p)
		if !ok || (!releaseAll && !c.essential(state)) {
			return nil
		}
		_, err := leases.Release(ctx, c.store, own, state, reservedFor, c.clock.Now())
		c.metrics.write("release", err)
		if err != nil && !(isLostRace(err) && stopped[p] != nil) {
			lost.Store(true)
			return fmt.Errorf("handing over partition %d: %w", p, err)
		}
		return nil
	})
	c.Fence()
	if reached.Load() < int64(len(held)+len(stopped)) {
		lost.Store(true) // the deadline came before every partition was stopped and handed over
	}
	return lost.Load(), errors.Join(errs...)
}

// stoppedNamingMe returns the cached leases of the partitions that name this process while no work
// of theirs runs here: stopped by a fence and not resumed, or released without success. A lease the
// cache shows older than the truth fails its release's precondition, which means another write came
// first: a resume here, or a takeover that did not wait for this state.
func (c *Coordinator) stoppedNamingMe() map[int]*coordinationv1.Lease {
	if c.lister == nil {
		return nil
	}
	stopped := map[int]*coordinationv1.Lease{}
	for _, l := range c.lister.List() {
		if l.Labels[leases.KindLabel] != leases.KindPartition || leases.Holder(l) != c.cfg.Member ||
			leases.Incarnation(l) != c.cfg.Incarnation {
			continue
		}
		if p, ok := leases.PartitionOf(c.cfg.Group, c.cfg.Ring.PartitionCount, l); ok && !c.Holds(p) {
			stopped[p] = l
		}
	}
	return stopped
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
