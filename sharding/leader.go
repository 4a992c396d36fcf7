package sharding

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// LeaderPartitions is the partition count of a Leader: it owns everything, so one partition holds it.
const LeaderPartitions = 1

// Leader is the Ownership of a replica that runs as the original dependency-watchdog does: leader
// election picks one active replica, which owns every shoot. It uses no member or partition Leases:
// from the moment the manager makes this process the leader until the process stops, it holds every
// partition in memory.
//
// Its fence is the leader lease's. The lease lock (FencedLock) records when each renewal it wrote
// was sent; a write is allowed only before that moment plus the renew deadline, and goes out under a
// context that ends then. The other candidates take the lease no earlier than a lease duration after
// they saw that renewal, which is later. Leader election itself gives up a little after the fence and
// stops the process, as the original does.
type Leader struct {
	lock     *FencedLock
	clock    clock.PassiveClock
	log      logr.Logger
	metrics  *memberMetrics
	handlers []PartitionHandler
	leading  atomic.Bool
}

// NewLeader returns the Ownership of a replica of group that leads while lock's renewals succeed.
// Its metrics name member (the host name) and show the leader lease's renewals as a member lease's,
// and one partition: the alerts on renewals and the dashboards read a leader as a group of one.
func NewLeader(group, member string, lock *FencedLock, log logr.Logger) *Leader {
	m := newMemberMetrics(group, member)
	partitions.WithLabelValues(group, member).Set(LeaderPartitions)
	lock.mu.Lock()
	lock.renewed = m.renewed
	lock.mu.Unlock()
	return &Leader{lock: lock, clock: lock.clock, log: log, metrics: m}
}

// AddHandler registers a handler; call it before the manager starts.
func (l *Leader) AddHandler(h PartitionHandler) { l.handlers = append(l.handlers, h) }

// NeedLeaderElection is true: the manager starts a Leader once this process leads.
func (l *Leader) NeedLeaderElection() bool { return true }

// Start hands every partition to the handlers and, when ctx ends (the process stops or lost the
// lease), takes them back, returning once their work has stopped. A new leader cannot know what the
// one before it was doing, so the takeover is a Crash: the weeder opens its start-up windows, as the
// original does on a restart.
func (l *Leader) Start(ctx context.Context) error {
	l.leading.Store(true)
	l.log.Info("Leading: every shoot is this replica's")
	for p := range LeaderPartitions {
		if l.lock.Audit != nil {
			l.lock.Audit.Acquired(p, AcquireLeading)
		}
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
		if l.lock.Audit != nil {
			l.lock.Audit.Released(p, ReleaseStop)
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
	now, at := l.clock.Now(), l.lock.FenceAt()
	if !now.Before(at) {
		l.metrics.guardRefusals.WithLabelValues("fenced").Inc()
		return ctx, noop, fmt.Errorf("%w: acting on %s", ErrFenced, namespace)
	}
	guarded, cancel := context.WithTimeout(ctx, at.Sub(now))
	return guarded, cancel, nil
}

// FencedLock is a leader election lock that records when the renewals it wrote were sent, so that
// the leader knows the moment it must stop writing: the send time of its last successful renewal
// plus the renew deadline.
type FencedLock struct {
	resourcelock.Interface
	// Audit, when set before the lock is first used, records each successful renewal with its fence
	// before the fence moves, and the Leader's start and stop (the ownership audit).
	Audit Audit

	renewDeadline time.Duration
	clock         clock.PassiveClock

	mu      sync.Mutex
	fenceAt time.Time
	// renewed, when set, is told the send time of every successful renewal (the Leader's metrics).
	renewed func(sent time.Time)
}

// NewFencedLock wraps lock; renewDeadline is the leader election's.
func NewFencedLock(lock resourcelock.Interface, renewDeadline time.Duration, clk clock.PassiveClock) *FencedLock {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &FencedLock{Interface: lock, renewDeadline: renewDeadline, clock: clk}
}

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
		// A release: no write may go out from the moment it is sent, whatever its answer.
		l.setFence(time.Time{})
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
		if l.Audit != nil {
			l.Audit.Renewed(sent.Add(l.renewDeadline))
		}
		l.setFence(sent.Add(l.renewDeadline))
		l.mu.Lock()
		renewed := l.renewed
		l.mu.Unlock()
		if renewed != nil {
			renewed(sent)
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
