package sharding

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// memberConn is one simulated process's connection to the store, used by its member (member loop)
// and its coordinator (reconcile loop). A call first waits until its loop may send (a handler's
// Released still under way holds the loop), then reaches the store unless the process is cut off
// (refused at once, or hanging until the call's deadline). During chaos a write may fail, lose its
// answer after it was applied, be applied late after the caller gave up, be answered late, or be
// the last thing the process does before a pause; a read may be answered late. The caller gets an
// answer only for what the store did by then: a write applied late is never answered.
type memberConn struct {
	sim  *simulation
	proc *simProc
}

var (
	errCutOff     = errors.New("connection refused: member cut off from the store")
	errInjected   = errors.New("injected write failure")
	errAnswerLost = errors.New("injected: the answer to a write was lost")
	errExited     = errors.New("the process has exited")
)

func errTimeout(what string) error {
	return fmt.Errorf("%s: %w", what, context.DeadlineExceeded)
}

// Per-write and per-read odds of the faults memberConn injects during chaos, cumulative.
const (
	simFailedWrites = 0.010
	simLostAnswers  = 0.015
	simLateWrites   = 0.020
	simSlowWrites   = 0.025
	simPausedWrites = 0.027
	// A pause comes more often right after a partition lease write: rebalances allocate.
	simPausedPartitionWrites = 0.035
	simSlowReads             = 0.005
)

// simDeadlineKey carries a store call's deadline in simulated time: a function of the moment the
// loop may send (after its stops), since a context made after a slow stop ends later.
type simDeadlineKey struct{}

type simDeadline func(sendable time.Time) time.Time

func fixedDeadline(at time.Time) simDeadline {
	return func(time.Time) time.Time { return at }
}

func (c memberConn) Get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	deadline, _, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	if c.sim.chaos && c.sim.draw(c.proc, "slow read", name) < simSlowReads {
		c.sim.count("slow read")
		if err := c.answerAt(c.sim.now.Add(c.sim.delay(c.proc, "read delay", name, 2*time.Second)), deadline); err != nil {
			return nil, err
		}
	}
	return c.sim.store.Get(ctx, name)
}

func (c memberConn) Create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return c.write(ctx, l, true, func() (*coordinationv1.Lease, error) { return c.sim.store.Create(context.Background(), l) })
}

func (c memberConn) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return c.write(ctx, l, true, func() (*coordinationv1.Lease, error) { return c.sim.store.Update(context.Background(), l) })
}

func (c memberConn) Delete(ctx context.Context, name, resourceVersion string) error {
	deleted := &coordinationv1.Lease{}
	deleted.Name = name
	_, err := c.write(ctx, deleted, false, func() (*coordinationv1.Lease, error) {
		return nil, c.sim.store.Delete(context.Background(), name, resourceVersion)
	})
	return err
}

// write sends one write of l and answers it as the injected fault, if any, has it; a delete is
// never held up (see mayHoldUp).
func (c memberConn) write(ctx context.Context, l *coordinationv1.Lease, holdable bool, apply func() (*coordinationv1.Lease, error)) (*coordinationv1.Lease, error) {
	name := l.Name
	if script := &c.proc.script; strings.Contains(name, "-member-") && c.sim.now.Before(script.refuseRenewalsUntil) {
		return nil, errInjected
	}
	deadline, hung, err := c.connect(ctx)
	if err != nil {
		if hung && c.sim.draw(c.proc, "buffered", name) < 0.25 {
			c.sim.count("late write (sent while cut off)")
			c.sim.deliverAt(c.proc.cutUntil, apply)
		}
		return nil, err
	}
	if until := c.scriptedPause(l); !until.IsZero() {
		return c.pauseAfter(name, apply, until)
	}
	if !c.sim.chaos {
		return c.answer(apply())
	}
	u := c.sim.draw(c.proc, "write", name)
	if u >= simFailedWrites && !(holdable && c.mayHoldUp()) {
		return c.answer(apply())
	}
	switch {
	case u < simFailedWrites:
		c.sim.count("failed write")
		return nil, errInjected
	case u < simLostAnswers:
		return c.lostAnswer(name, apply, deadline)
	case u < simLateWrites:
		return c.lateWrite(name, apply, deadline)
	case u < simSlowWrites:
		return c.slowWrite(name, apply, deadline)
	case u < simPausedWrites && c.sim.pausable(c.proc),
		strings.Contains(name, "-partition-") && u < simPausedPartitionWrites && c.sim.pausable(c.proc):
		c.sim.count("pause (right after a write)")
		return c.pauseAfter(name, apply, c.sim.now.Add(c.sim.delay(c.proc, "pause", name, simMaxPause)))
	}
	return c.answer(apply())
}

// mayHoldUp reports whether a fault may hold a write up (answer it late, or never). Not during a
// graceful stop, nor for a delete: Coordinator.Leave and Coordinator.deleteOrphans write in the
// order Go's map iteration gives them (the Runner writes 16 at a time), and a write held up would
// delay those after it in an order no seed decides.
func (c memberConn) mayHoldUp() bool {
	return c.proc.phase == procRunning
}

// scriptedPause returns when a scripted pause right after writing l ends, zero for none.
func (c memberConn) scriptedPause(l *coordinationv1.Lease) time.Time {
	script := &c.proc.script
	if script.pauseAfterAcquire.IsZero() || leases.Holder(l) != c.proc.name || !strings.Contains(l.Name, "-partition-") {
		return time.Time{}
	}
	until := script.pauseAfterAcquire
	script.pauseAfterAcquire = time.Time{}
	return until
}

// lostAnswer applies the write, but the caller hears nothing until it gives up.
func (c memberConn) lostAnswer(name string, apply func() (*coordinationv1.Lease, error), deadline time.Time) (*coordinationv1.Lease, error) {
	c.sim.count("ambiguous write (applied, answer lost)")
	_, _ = apply()
	if err := c.answerAt(c.sim.now.Add(c.sim.delay(c.proc, "give up", name, 2*time.Second)), deadline); err != nil {
		return nil, err
	}
	return nil, errAnswerLost
}

// lateWrite applies the write some seconds later; the caller gives up before.
func (c memberConn) lateWrite(name string, apply func() (*coordinationv1.Lease, error), deadline time.Time) (*coordinationv1.Lease, error) {
	c.sim.count("late write (applied after the caller gave up)")
	late := c.sim.delay(c.proc, "late", name, simMaxLateWrite)
	c.sim.deliverAt(c.sim.now.Add(late), apply)
	giveUp := c.sim.delay(c.proc, "give up", name, late)
	if err := c.answerAt(c.sim.now.Add(giveUp), deadline); err != nil {
		return nil, err
	}
	return nil, errTimeout("no answer to a write")
}

// slowWrite applies and answers the write some seconds later, if the caller still waits by then.
func (c memberConn) slowWrite(name string, apply func() (*coordinationv1.Lease, error), deadline time.Time) (*coordinationv1.Lease, error) {
	c.sim.count("slow write (applied and answered late)")
	at := c.sim.now.Add(c.sim.delay(c.proc, "slow", name, simMaxLateWrite))
	if err := c.answerAt(at, deadline); err != nil {
		c.sim.deliverAt(at, apply)
		return nil, err
	}
	return c.answer(apply())
}

// pauseAfter applies the write, and the process freezes until until before it reads the answer: it
// gets the answer, sent before its deadline, only when it resumes.
func (c memberConn) pauseAfter(name string, apply func() (*coordinationv1.Lease, error), until time.Time) (*coordinationv1.Lease, error) {
	l, err := apply()
	applied := c.sim.now
	c.proc.pausedUntil = until
	c.sim.trace("%s pauses until %s right after writing %s (holder %q, %v)", c.proc.incarnation, c.proc.pausedUntil.Sub(c.sim.start), name, leases.Holder(l), err)
	if err := c.sleep(c.sim.now.Add(simStep)); err != nil {
		return nil, err
	}
	return c.answerApplied(applied, l, err)
}

// answer records a successful write of a partition lease as answered to this incarnation: only such
// a write may start work.
func (c memberConn) answer(l *coordinationv1.Lease, err error) (*coordinationv1.Lease, error) {
	return c.answerApplied(c.sim.now, l, err)
}

// answerApplied is answer for a write applied at appliedAt.
func (c memberConn) answerApplied(appliedAt time.Time, l *coordinationv1.Lease, err error) (*coordinationv1.Lease, error) {
	if err == nil && l != nil && strings.Contains(l.Name, "-partition-") {
		c.sim.answered[simAnswer{incarnation: c.proc.incarnation, version: l.ResourceVersion}] = appliedAt
	}
	return l, err
}

// connect waits until the calling loop may send (its stops have ended) and the store is reachable,
// and returns the call's deadline; hung says the call timed out on a hanging connection.
func (c memberConn) connect(ctx context.Context) (deadline time.Time, hung bool, err error) {
	loop := c.sim.running
	deadline = c.sim.now.Add(simClientTimeout)
	if f, ok := ctx.Value(simDeadlineKey{}).(simDeadline); ok {
		deadline = f(simLater(c.sim.now, loop.busyUntil))
	}
	if err := c.answerAt(loop.busyUntil, deadline); err != nil {
		return deadline, false, err
	}
	switch p := c.proc; {
	case !p.cutOff:
		return deadline, false, nil
	case !p.hanging:
		return deadline, false, errCutOff
	case p.cutUntil.After(deadline):
		if err := c.sleep(deadline); err != nil {
			return deadline, false, err
		}
		return deadline, true, errTimeout("no answer from the store")
	}
	return deadline, false, c.sleep(c.proc.cutUntil)
}

// answerAt waits until at, or fails at the deadline when that comes first.
func (c memberConn) answerAt(at, deadline time.Time) error {
	if at.After(deadline) {
		if err := c.sleep(deadline); err != nil {
			return err
		}
		return errTimeout("waiting for the store")
	}
	return c.sleep(at)
}

// sleep suspends the calling loop until at; it fails when the process has exited.
func (c memberConn) sleep(at time.Time) error {
	if c.proc.gone() {
		return errExited
	}
	if !at.After(c.sim.now) {
		return nil
	}
	if !c.sim.running.suspend(at) || c.proc.gone() {
		return errExited
	}
	return nil
}

// cacheView is one member's cache of the store: it replays the store's writes up to a point in time,
// deletions included.
type cacheView struct {
	store   *leasestest.Store
	applied int
	objects map[string]*coordinationv1.Lease
	list    []*coordinationv1.Lease // objects in name order; nil when it must be rebuilt
	// deliver, when set, is told of each change applied (before nil for an add, after nil for a
	// delete), as the Runner's caches tell their event handlers, and says whether it starts a
	// reconcile.
	deliver func(before, after *coordinationv1.Lease) bool
}

func newCacheView(store *leasestest.Store) *cacheView {
	return &cacheView{store: store, objects: map[string]*coordinationv1.Lease{}}
}

// catchUp applies the writes made up to until; it reports whether a change starts a reconcile: any
// change, or those deliver says start one.
func (v *cacheView) catchUp(until time.Time) bool {
	changed, starts := false, false
	for _, e := range v.store.Events(v.applied) {
		if e.At.After(until) {
			break
		}
		before, after := v.objects[e.Lease.Name], e.Lease
		if e.Deleted {
			delete(v.objects, e.Lease.Name)
			after = nil
		} else {
			v.objects[e.Lease.Name] = e.Lease
		}
		v.applied++
		changed = true
		if v.deliver == nil || v.deliver(before, after) {
			starts = true
		}
	}
	if changed {
		v.list = nil
	}
	return starts
}

// List returns the cached Leases in name order.
func (v *cacheView) List() []*coordinationv1.Lease {
	if v.list == nil {
		v.list = leasestest.InNameOrder(v.objects)
	}
	return v.list
}
