package sharding

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// simConfig is what a simulated process runs with: the group settings it advertises, its ring, its
// member lease timings and what it waits before another member's lease counts as expired.
type simConfig struct {
	skew          string // "" for the group's settings, else what differs
	ring          RingConfig
	settings      string
	leaseDuration time.Duration // the member's, which it advertises
	renewDeadline time.Duration
	retryPeriod   time.Duration
	observed      time.Duration // the coordinator's LeaseDuration
	// fenceBudget is how long the Runner lets a fence take before the process exits: half the margin
	// the configured lease timings leave.
	fenceBudget time.Duration
}

// simPhase is where a process is in its life.
type simPhase int

const (
	procRunning   simPhase = iota
	procLeaving            // a graceful stop: the reconcile loop runs Coordinator.Leave next
	procReleasing          // the member loop releases the member lease next
	procGone               // exited or crashed
)

// simProc is one process of a member: an incarnation with its own clock, cache, member lease loop and
// coordinator. Several processes may run under one name at once (a duplicate).
type simProc struct {
	name, incarnation, podUID string
	cfg                       simConfig
	epoch                     time.Time     // the simulation's start, where its clock's offset is counted from
	offset                    time.Duration // clock offset from the simulation's time
	rate                      float64       // clock rate
	clock                     *clocktesting.FakeClock
	member                    *leases.Member
	coordinator               *Coordinator
	view                      *cacheView
	ctx                       context.Context
	cancel                    context.CancelFunc
	memberLoop, reconcileLoop *simLoop
	nextStep, nextReconcile   time.Time
	dirty                     bool // the cache changed since the last reconcile began
	// reconciledFrom is how many of the store's writes the cache showed when the last reconcile began.
	reconciledFrom int
	phase          simPhase
	returning      time.Duration // a graceful stop's return grace; 0 hands the share over
	departing      bool          // a graceful stop leaves the group for good
	stateLost      bool
	lag            time.Duration // how far its cache trails the store
	cutOff         bool
	hanging        bool // calls hang until their deadline while cut off, instead of being refused
	cutUntil       time.Time
	pausedUntil    time.Time
	latency        time.Duration // stop latency: how long each Released takes until latencyUntil
	latencyUntil   time.Time
	booted         time.Time
	exitAt         time.Time // the process exits then (a fence overran its budget)
	identityLost   bool      // another process took over its member lease
	downUntil      time.Time // stepped down after fencing too often
	script         simScript
}

// simScript is what a scripted scenario sets on a process to reach a narrow window.
type simScript struct {
	refuseRenewalsUntil time.Time             // member lease writes are refused until then
	pauseAfterAcquire   time.Time             // the process pauses until then right after its next acquire write
	memberFirst         bool                  // the member loop runs first in every step
	reconcileFirst      bool                  // the reconcile loop runs first in every step
	slowStops           map[int]time.Duration // the stop of these partitions takes this long
}

// local is the process's clock reading at simulation time now.
func (p *simProc) local(now time.Time) time.Time {
	return p.epoch.Add(p.offset + time.Duration(float64(now.Sub(p.epoch))*p.rate))
}

// simTime is the simulation time at which the process's clock reads local.
func (p *simProc) simTime(local time.Time) time.Time {
	return p.epoch.Add(time.Duration(float64(local.Sub(p.epoch)-p.offset) / p.rate))
}

// simDuration is how much simulation time passes while the process's clock advances by d.
func (p *simProc) simDuration(d time.Duration) time.Duration {
	return time.Duration(float64(d) / p.rate)
}

// paused reports whether the process is frozen: from the start of a pause until it runs again, in
// its first step at or after pausedUntil.
func (p *simProc) paused() bool { return !p.pausedUntil.IsZero() }

// pausedAt reports whether the process is still to sleep through a pause at now.
func (p *simProc) pausedAt(now time.Time) bool { return now.Before(p.pausedUntil) }

// gone reports whether the process has exited or is about to (its store calls fail).
func (p *simProc) gone() bool { return p.phase == procGone || !p.exitAt.IsZero() }

// stopLatency is how long a handler's Released of partition part takes at now.
func (p *simProc) stopLatency(part int, now time.Time) time.Duration {
	if d, ok := p.script.slowStops[part]; ok {
		return d
	}
	if now.Before(p.latencyUntil) {
		return p.latency
	}
	return 0
}

// simHandler is a process's partition work: it tells the checker when it starts and stops.
type simHandler struct {
	sim  *simulation
	proc *simProc
}

func (h simHandler) Acquired(_ context.Context, p int, _ Takeover) { h.sim.acquired(h.proc, p) }

func (h simHandler) Released(p int) { h.sim.released(h.proc, p) }

// neverFenced is the broken liveness of a member that acts on without a renewed lease.
type neverFenced struct{}

func (neverFenced) Fenced(time.Time) bool { return false }

func (neverFenced) FenceAt() time.Time { return time.Now().Add(time.Hour) }

func (neverFenced) Outage() (time.Time, time.Time) { return time.Time{}, time.Time{} }

func (neverFenced) ViewStale(string, time.Time, time.Duration) bool { return false }

// boot starts a new process under name in Pod podUID: a new incarnation with its own clock and an
// empty cache.
func (s *simulation) boot(name string, cfg simConfig, podUID string) *simProc {
	n := s.nameOf(name)
	n.generation++
	p := &simProc{name: name, incarnation: fmt.Sprintf("%s/%d", name, n.generation), podUID: podUID, cfg: cfg,
		epoch: s.start, offset: time.Duration(s.rng.IntN(20_000)-10_000) * time.Millisecond,
		rate: 1 + (s.rng.Float64()-0.5)*0.002, lag: time.Duration(s.rng.IntN(300)) * time.Millisecond,
		memberLoop: newSimLoop(), reconcileLoop: newSimLoop(), nextStep: s.now, nextReconcile: s.now, booted: s.now}
	p.clock = clocktesting.NewFakeClock(p.local(s.now))
	p.view = newCacheView(s.store)
	// As the Runner's caches: the view notes when each version arrived, which the coordinator judges
	// members by, and a steady renewal starts no reconcile.
	delivered := newDeliveries(p.clock)
	settled := func() bool { return !p.reconcileLoop.active && p.coordinator.settled() }
	p.view.deliver = func(before, after *coordinationv1.Lease) bool {
		return delivered.starts(before, after, cfg.observed/steadyRenewals, leases.MemberLeaseName(simGroup, name), settled)
	}
	conn := memberConn{sim: s, proc: p}
	p.member = &leases.Member{Store: conn, Group: simGroup, Name: name, Incarnation: p.incarnation,
		LeaseDuration: cfg.leaseDuration, RenewDeadline: cfg.renewDeadline, RetryPeriod: cfg.retryPeriod,
		Clock: p.clock, Settings: cfg.settings, PodUID: podUID}
	var liveness Liveness = p.member
	if s.variant.neverFence {
		liveness = neverFenced{}
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.coordinator = NewCoordinator(Config{Group: simGroup, Member: name, Incarnation: p.incarnation,
		Ring: cfg.ring, LeaseDuration: cfg.observed, RetryPeriod: cfg.retryPeriod, WriteConcurrency: 1,
		// Every other process acquires released partitions in batches of 3 (the Runner's
		// AcquireBatch, small): both kinds meet in every group. No random draw, so that each seed's
		// run stays what it was.
		AcquireBatch: []int{0, 3}[len(s.procs)%2],
		Settings:     cfg.settings,
		WorkContext:  p.ctx, Store: conn, Lister: p.view, SeenAt: delivered.seenAt, Liveness: liveness, Clock: p.clock, Log: s.logger(p), Handlers: []PartitionHandler{simHandler{sim: s, proc: p}}})
	p.coordinator.broken = s.variant.broken
	p.coordinator.cfg.WontReturn = func(context.Context, string) (bool, error) { return false, nil }
	p.member.MayJoin = p.coordinator.MayJoin
	s.procs = append(s.procs, p)
	s.trace("boot %s in %s (offset %s, settings %s)", p.incarnation, podUID, p.offset, cfg.skew)
	return p
}

// logger is a process's log: the trace when tracing, else nothing.
func (s *simulation) logger(p *simProc) logr.Logger {
	if !s.tracing {
		return logr.Discard()
	}
	return funcr.New(func(_, args string) { s.trace("%s log: %s", p.incarnation, args) }, funcr.Options{Verbosity: 1})
}

// tick runs one step of a process: its cache catches up, and each of its loops, in random order,
// goes on with its suspended call when that is due or starts its next call when that is due.
func (s *simulation) tick(p *simProc) {
	if p.paused() {
		s.trace("%s resumes", p.incarnation)
	}
	p.pausedUntil = time.Time{}
	p.clock.SetTime(p.local(s.now))
	if p.cutOff && !s.now.Before(p.cutUntil) {
		p.cutOff = false
	}
	if !p.cutOff && p.view.catchUp(s.now.Add(-p.lag)) {
		p.dirty = true
	}
	first, second := s.memberRound, s.reconcileRound
	if s.rng.IntN(2) == 0 && !p.script.memberFirst || p.script.reconcileFirst {
		first, second = second, first
		s.trace("%s: reconcile loop first", p.incarnation)
	}
	first(p)
	if !p.gone() && !p.paused() {
		second(p)
	}
}

// memberRound runs the member loop: rounds of Member.Step when due (as Member.Run, it starts the
// next at once when Step asks for no wait), or at shutdown, once the reconcile loop has left, the
// release of the member lease.
func (s *simulation) memberRound(p *simProc) {
	for range 3 {
		switch l := p.memberLoop; {
		case l.active:
			if s.now.Before(l.wake) {
				return
			}
			s.proceed(l)
		case s.now.Before(l.busyUntil):
			return
		case p.phase == procReleasing:
			if !p.reconcileLoop.active && !s.now.Before(p.reconcileLoop.busyUntil) {
				s.runRelease(p)
			}
			return
		case !s.now.Before(p.nextStep):
			s.runStep(p)
		default:
			return
		}
		if p.memberLoop.active || p.gone() || p.paused() {
			return
		}
	}
}

// reconcileRound runs the reconcile loop: a reconcile when the cache changed or the requeue time has
// come, or at shutdown Coordinator.Leave.
func (s *simulation) reconcileRound(p *simProc) {
	switch l := p.reconcileLoop; {
	case l.active:
		if !s.now.Before(l.wake) {
			s.proceed(l)
		}
	case s.now.Before(l.busyUntil):
	case p.phase == procLeaving:
		s.runLeave(p)
	case p.phase == procRunning && (p.dirty || !s.now.Before(p.nextReconcile)):
		s.runReconcile(p)
	}
}

// call starts a call on loop and waits until it returns or suspends.
func (s *simulation) call(loop *simLoop, call, done func()) {
	s.running = loop
	loop.start(s.now, call, done)
	s.running = nil
}

// proceed resumes loop's suspended call.
func (s *simulation) proceed(loop *simLoop) {
	s.running = loop
	loop.proceed(true)
	s.running = nil
}

// runStep runs one round of the real member loop, as Member.Run does, with the hooks the Runner
// gives it; its store calls end at the moment Step's own context would.
func (s *simulation) runStep(p *simProc) {
	ctx := context.WithValue(p.ctx, simDeadlineKey{}, s.stepDeadline(p))
	hooks := s.hooks(p)
	var wait time.Duration
	s.call(p.memberLoop, func() { wait = p.member.Step(ctx, hooks) }, func() {
		p.nextStep = simLater(s.now.Add(p.simDuration(wait)), p.memberLoop.busyUntil)
		if p.identityLost && !p.member.Fenced(p.clock.Now()) {
			p.identityLost = false // the other process's lease was deleted, and this one took it again
		}
	})
}

// stepDeadline is the deadline of Step's renewal: the fence moment, or one retry period when fenced
// already, counted (as context.WithTimeout does) from when the renewal is sent.
func (s *simulation) stepDeadline(p *simProc) simDeadline {
	local := p.clock.Now()
	at := p.member.FenceAt()
	if p.member.Fenced(local) {
		at = local.Add(p.cfg.retryPeriod)
	}
	rel, began := p.simDuration(at.Sub(local)), s.now
	return func(sendable time.Time) time.Time { return simLater(began, sendable).Add(rel) }
}

// hooks are the Runner's member loop hooks: a fence stops all work, and the process exits when that
// takes longer than its budget; a lost name and a step-down are recorded; the member stops renewing
// while its reconcile loop is stuck.
func (s *simulation) hooks(p *simProc) leases.Hooks {
	return leases.Hooks{
		OnFence: func() { s.onFence(p) },
		OnRenewFailure: func(err error) {
			s.trace("%s renew failed: %v", p.incarnation, err)
			if errors.Is(err, leases.ErrIdentityTaken) {
				p.identityLost = true
			}
		},
		OnStepDown: func(until time.Time) {
			p.downUntil = p.simTime(until)
			s.count("step-down (fenced too often)")
		},
		MayStepDown: p.coordinator.MayStepDown,
		Healthy: func() bool {
			l := p.reconcileLoop
			stuck := l.active || s.now.Before(l.busyUntil)
			return !stuck || s.now.Sub(l.since) < p.simDuration(p.cfg.renewDeadline)
		},
	}
}

// onFence is Runner.onFence: the work stops, and when that overran the budget the process exits at
// the end of the budget (the partitions still stopping stop with it).
func (s *simulation) onFence(p *simProc) {
	if s.variant.neverFence {
		return
	}
	began := s.now
	s.trace("%s fences", p.incarnation)
	p.coordinator.Fence()
	// Fence also waits for stops already under way in the reconcile loop (it takes every
	// partition's lock), so those count against the budget too.
	done := p.memberLoop.busyUntil
	s.actingMu.Lock()
	for _, acts := range s.acting {
		if a, ok := acts[p.incarnation]; ok && a.until.After(done) {
			done = a.until
		}
	}
	s.actingMu.Unlock()
	if done.Sub(began) > p.simDuration(p.cfg.fenceBudget) {
		s.count("fence overran its budget: process exits")
		s.exit(p, began.Add(p.simDuration(p.cfg.fenceBudget)))
	}
}

// runReconcile runs one reconcile with the Runner's deadline: the fence moment.
func (s *simulation) runReconcile(p *simProc) {
	p.dirty, p.reconciledFrom = false, p.view.applied
	ctx := p.ctx
	if at := p.member.FenceAt(); !at.IsZero() && !s.variant.neverFence {
		ctx = context.WithValue(ctx, simDeadlineKey{}, fixedDeadline(p.simTime(at)))
	}
	var requeue time.Duration
	var err error
	s.call(p.reconcileLoop, func() { requeue, err = p.coordinator.Reconcile(ctx) }, func() {
		if err != nil {
			requeue = simStep // the Runner's rate limiter retries after 100 ms at first
		}
		p.nextReconcile = simLater(s.now.Add(p.simDuration(requeue)), p.reconcileLoop.busyUntil)
	})
}

// startLeave begins a graceful stop, as Runner.shutdown does it: the reconcile loop finishes its
// call and leaves (Coordinator.Leave, or Coordinator.LeaveForGood when departing), then the member
// loop finishes its round and releases the member lease, returning for the grace given or handing
// the share over.
func (s *simulation) startLeave(p *simProc, returning time.Duration, departing bool) {
	p.phase, p.returning, p.departing = procLeaving, returning, departing
}

func (s *simulation) runLeave(p *simProc) {
	ctx := context.WithValue(p.ctx, simDeadlineKey{}, fixedDeadline(s.now.Add(p.simDuration(p.cfg.renewDeadline))))
	leave := func() (bool, error) { return p.coordinator.Leave(ctx, p.returning > 0) }
	if p.departing {
		leave = func() (bool, error) { return p.coordinator.LeaveForGood(ctx) }
	}
	s.call(p.reconcileLoop, func() { p.stateLost, _ = leave() }, func() {
		if p.phase == procLeaving {
			p.phase = procReleasing
		}
	})
}

func (s *simulation) runRelease(p *simProc) {
	ctx := context.WithValue(p.ctx, simDeadlineKey{}, fixedDeadline(s.now.Add(p.simDuration(p.cfg.renewDeadline))))
	leave := leases.Leave{Returning: p.returning, StateLost: p.stateLost}
	s.call(p.memberLoop, func() {
		err := p.member.Release(ctx, p.clock.Now(), leave)
		s.trace("%s released its member lease (returning %s, departing %v): %v", p.incarnation, p.returning, p.departing, err)
	}, func() { s.end(p) })
}

// end is the exit of a process that left gracefully: partitions still stopping go on until their
// stop ends.
func (s *simulation) end(p *simProc) {
	if p.phase != procGone {
		s.trace("%s left", p.incarnation)
		p.phase = procGone
		p.cancel()
	}
}

// crash ends a process at once: its work is gone with it, and calls it has in flight fail.
func (s *simulation) crash(p *simProc) {
	s.trace("%s exits at once", p.incarnation)
	p.phase = procGone
	for _, l := range []*simLoop{p.memberLoop, p.reconcileLoop} {
		if l.active {
			s.running = l
			l.proceed(false)
			s.running = nil
		}
	}
	p.cancel()
	s.actingMu.Lock()
	defer s.actingMu.Unlock()
	for _, acts := range s.acting {
		delete(acts, p.incarnation)
	}
}

// exit makes the process exit at at: its store calls fail from now on, and the work still stopping
// stops then at the latest.
func (s *simulation) exit(p *simProc, at time.Time) {
	p.exitAt = at
	s.actingMu.Lock()
	defer s.actingMu.Unlock()
	for _, acts := range s.acting {
		if a := acts[p.incarnation]; a != nil && (a.until.IsZero() || a.until.After(at)) {
			a.until = at
		}
	}
}

func simLater(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
