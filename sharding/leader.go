package sharding

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// LeaderPartitions is the partition count of a Leader: it owns everything, so one partition holds it.
const LeaderPartitions = 1

// Leader is the Ownership of a replica that runs as the original dependency-watchdog does: leader
// election picks one active replica, which owns every shoot. It uses no member or partition Leases:
// from the moment the manager makes this process the leader until the process stops, it holds every
// partition in memory.
//
// Its fence is the leader lease's. The lease lock (FencedLock) records when each renewal it wrote
// was sent; a write is allowed only before that moment plus the lock's window (the renew deadline,
// clamped to keep the fence margin: LeaderFenceWindow), and goes out under a context that ends then.
// The other candidates take the lease no earlier than a lease duration after they saw that renewal,
// which is at least the margin later. A release ends every write that passed the guard before it is
// sent, since a candidate takes a released lease at once. Leader election itself gives up a little
// after the fence and stops the process, as the original does.
type Leader struct {
	lock     *FencedLock
	clock    clock.PassiveClock
	log      logr.Logger
	metrics  *memberMetrics
	handlers []PartitionHandler
	leading  atomic.Bool
}

// LeaderOptions are the settings and dependencies of a Leader. Lock is required; NewLeader defaults
// Clock and Log on a copy when they are left nil.
type LeaderOptions struct {
	// Group and Member name the leader in its metrics: the group of its role and the host name. The
	// metrics show the leader lease's renewals as a member lease's, and one partition, so that the
	// alerts on renewals and the dashboards read a leader as a group of one.
	Group, Member string
	// Lock is the lock of the leader lease (resourcelock.New); the Leader wraps it in a FencedLock,
	// which the manager's leader election must use (Leader.Lock).
	Lock resourcelock.Interface
	// RenewDeadline and LeaseDuration are the leader election's: the fence follows each renewal by
	// LeaderFenceWindow of them.
	RenewDeadline, LeaseDuration time.Duration
	// Audit, when set, records each successful renewal with its fence before the fence moves, and the
	// Leader's start and stop (the ownership audit).
	Audit Audit
	// Handlers run the work while this process leads; AddHandler adds more before the manager starts.
	Handlers []PartitionHandler
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Log defaults to a logger that discards.
	Log logr.Logger
}

// NewLeader returns the Ownership of a replica that leads while the renewals of its lock succeed.
func NewLeader(opts LeaderOptions) *Leader {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	m := newMemberMetrics(opts.Group, opts.Member)
	partitions.WithLabelValues(opts.Group, opts.Member).Set(LeaderPartitions)
	lock := &FencedLock{Interface: opts.Lock, audit: opts.Audit, window: LeaderFenceWindow(opts.RenewDeadline, opts.LeaseDuration),
		clock: opts.Clock, inflight: map[*guardedWrite]struct{}{}, renewed: m.renewed}
	return &Leader{lock: lock, clock: opts.Clock, log: opts.Log, metrics: m, handlers: opts.Handlers}
}

// Lock is the leader lease's lock, fenced: the one the manager's leader election must renew through
// (manager.Options.LeaderElectionResourceLockInterface), so that the Leader knows its fence.
func (l *Leader) Lock() *FencedLock { return l.lock }

// AddHandler registers a handler; call it before the manager starts.
func (l *Leader) AddHandler(h PartitionHandler) { l.handlers = append(l.handlers, h) }

// NeedLeaderElection is true: the manager starts a Leader once this process leads.
func (l *Leader) NeedLeaderElection() bool { return true }

// Start hands every partition to the handlers and, when ctx ends (the process stops or lost the
// lease), takes them back, returning once their work has stopped. A new leader cannot know what the
// one before it was doing, so the takeover is a Crash: the weeder opens its start-up windows, as the
// original does on a restart.
func (l *Leader) Start(ctx context.Context) error {
	// The acquire is on record before Guard can pass a write.
	for p := range LeaderPartitions {
		if l.lock.audit != nil {
			l.lock.audit.Acquired(p, AcquireLeading)
		}
	}
	l.leading.Store(true)
	l.log.Info("Leading: every shoot is this replica's")
	for p := range LeaderPartitions {
		for _, h := range l.handlers {
			h.Acquired(ctx, p, Takeover{Cause: Crash})
		}
	}
	l.metrics.partitionsHeld.Set(LeaderPartitions)
	<-ctx.Done()
	l.leading.Store(false)
	for p := range LeaderPartitions {
		for _, h := range l.handlers {
			h.Released(p)
		}
		if l.lock.audit != nil {
			l.lock.audit.Released(p, ReleaseStop)
		}
	}
	l.metrics.partitionsHeld.Set(0)
	l.log.Info("Stopped leading: all work stopped")
	return nil
}

// Owns reports whether this process leads. Unlike a Coordinator's, it stays true past the fence
// while the process still leads: a Leader takes nothing back at a fence and hands nothing out again
// after a late renewal, so work stopped for a fence (a probe, a weeding window) would never restart.
// Guard refuses the writes past the fence; leader election ends the process soon after if the lease
// is not renewed.
func (l *Leader) Owns(string) bool {
	return l.leading.Load()
}

// Partition is the one partition of a Leader.
func (l *Leader) Partition(string) int { return 0 }

// Guard allows a write while this process leads and is before its fence, bounded by the fence.
func (l *Leader) Guard(ctx context.Context, namespace string) (context.Context, context.CancelFunc, error) {
	noop := func() {}
	if !l.leading.Load() {
		l.metrics.guardRefusals.WithLabelValues("not_owner").Inc()
		return ctx, noop, fmt.Errorf("%w: this replica does not lead", ErrNotOwner)
	}
	guarded, cancel, ok := l.lock.guard(ctx)
	if !ok {
		l.metrics.guardRefusals.WithLabelValues("fenced").Inc()
		return ctx, noop, fmt.Errorf("%w: acting on %s", ErrFenced, namespace)
	}
	return guarded, cancel, nil
}

// LeaderFenceWindow is how long after a renewal was sent the leader may write: the renew deadline,
// but no more than the lease duration the candidates read (whole seconds) less the fence margin that
// member leases keep (config.FenceMargin), which covers stopping the work, timer latency and
// clock-rate drift. The original's flags accept a renew deadline a moment short of the duration (15 s
// and 14.5 s); the window is then 12 s. At most zero when the duration leaves no room for the margin.
func LeaderFenceWindow(renewDeadline, leaseDuration time.Duration) time.Duration {
	return min(renewDeadline, leaseDuration.Truncate(time.Second)-config.FenceMargin(leaseDuration))
}

// FencedLock is a leader election lock that records when the renewals it wrote were sent, so that
// the leader knows the moment it must stop writing: the send time of its last successful renewal
// plus its window (LeaderFenceWindow). It tracks the writes that passed the guard until they end, so
// that a release can end them first.
type FencedLock struct {
	resourcelock.Interface
	// audit, when set, records each successful renewal with its fence before the fence moves, and the
	// Leader's start and stop (LeaderOptions.Audit).
	audit Audit

	window time.Duration
	clock  clock.PassiveClock

	mu      sync.Mutex
	fenceAt time.Time
	// inflight are the writes that passed the guard and have not ended.
	inflight map[*guardedWrite]struct{}
	// renewed is told the send time of every successful renewal (the Leader's metrics).
	renewed func(sent time.Time)
}

// guardedWrite is a write that passed the guard: cancel ends its context, done closes when it ended.
type guardedWrite struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Window is how long after a renewal was sent the leader may write.
func (l *FencedLock) Window() time.Duration { return l.window }

// Create takes the lease when nobody holds it.
func (l *FencedLock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	sent := l.clock.Now()
	err := l.Interface.Create(ctx, record)
	l.written(record, sent, err)
	return err
}

// Update renews the lease, takes it over, or releases it.
func (l *FencedLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if record.HolderIdentity != l.Identity() {
		// A release: a candidate takes the lease as soon as it reads it, so no write may go out or be
		// on its way from the moment it is sent, whatever its answer.
		l.revoke()
		return l.Interface.Update(ctx, record)
	}
	sent := l.clock.Now()
	err := l.Interface.Update(ctx, record)
	l.written(record, sent, err)
	return err
}

// written moves the fence after a successful write that names this process the holder.
func (l *FencedLock) written(record resourcelock.LeaderElectionRecord, sent time.Time, err error) {
	if err == nil && record.HolderIdentity == l.Identity() {
		if l.audit != nil {
			l.audit.Renewed(sent.Add(l.window))
		}
		l.setFence(sent.Add(l.window))
		l.mu.Lock()
		renewed := l.renewed
		l.mu.Unlock()
		if renewed != nil {
			renewed(sent)
		}
	}
}

// guard bounds ctx by the fence and tracks the write until its cancel is called; false when the fence
// has passed.
func (l *FencedLock) guard(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if !now.Before(l.fenceAt) {
		return ctx, func() {}, false
	}
	guarded, cancel := context.WithTimeout(ctx, l.fenceAt.Sub(now))
	w := &guardedWrite{cancel: cancel, done: make(chan struct{})}
	l.inflight[w] = struct{}{}
	var once sync.Once
	return guarded, func() {
		once.Do(func() {
			cancel()
			l.mu.Lock()
			delete(l.inflight, w)
			l.mu.Unlock()
			close(w.done)
		})
	}, true
}

// revoke ends the right to write: no write passes the guard from now on, and every write that passed
// it is cancelled. It returns once they all ended, or at the latest at the fence it revoked, when
// their contexts ended anyway.
func (l *FencedLock) revoke() {
	l.mu.Lock()
	fence := l.fenceAt
	l.fenceAt = time.Time{}
	pending := slices.Collect(maps.Keys(l.inflight))
	l.mu.Unlock()
	for _, w := range pending {
		w.cancel()
	}
	timer := time.NewTimer(max(fence.Sub(l.clock.Now()), 0))
	defer timer.Stop()
	for _, w := range pending {
		select {
		case <-w.done:
		case <-timer.C:
			return
		}
	}
}

func (l *FencedLock) setFence(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fenceAt = at
}

// FenceAt returns the moment this process must stop writing; zero when it never held the lease.
func (l *FencedLock) FenceAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenceAt
}
