package sharding

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeLock is a leader lock whose writes fail while failing is set.
type fakeLock struct {
	resourcelock.Interface
	failing bool
}

func (l *fakeLock) Identity() string { return "me" }

func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.err() }

func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.err() }

func (l *fakeLock) err() error {
	if l.failing {
		return errors.New("the API server is away")
	}
	return nil
}

// leaderWork records the partitions handed to it, and their contexts.
type leaderWork struct {
	mu       sync.Mutex
	acquired map[int]Takeover
	released []int
	ctxs     []context.Context
}

func (w *leaderWork) Acquired(ctx context.Context, p int, t Takeover) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acquired[p] = t
	w.ctxs = append(w.ctxs, ctx)
}

func (w *leaderWork) Released(p int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.released = append(w.released, p)
}

func TestFencedLockFenceFollowsSuccessfulRenewals(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	inner := &fakeLock{}
	lock := NewFencedLock(inner, 10*time.Second, clk)
	ctx := context.Background()
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}

	assert.True(t, lock.FenceAt().IsZero(), "never held: no fence moment")
	require.NoError(t, lock.Create(ctx, mine))
	assert.Equal(t, time.Unix(1010, 0), lock.FenceAt(), "the send time of the write plus the renew deadline")

	clk.SetTime(time.Unix(1004, 0))
	require.NoError(t, lock.Update(ctx, mine))
	assert.Equal(t, time.Unix(1014, 0), lock.FenceAt())

	clk.SetTime(time.Unix(1006, 0))
	inner.failing = true
	require.Error(t, lock.Update(ctx, mine))
	assert.Equal(t, time.Unix(1014, 0), lock.FenceAt(), "a failed renewal does not move the fence")

	require.Error(t, lock.Update(ctx, resourcelock.LeaderElectionRecord{}))
	assert.True(t, lock.FenceAt().IsZero(), "a release ends the right to write when it is sent, whatever its answer")
}

func TestLeaderOwnsEverythingWhileLeadingAndBeforeItsFence(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	lock := NewFencedLock(&fakeLock{}, 10*time.Second, clk)
	leader := NewLeader("leader-metrics", "me", lock, logr.Discard())
	work := &leaderWork{acquired: map[int]Takeover{}}
	leader.AddHandler(work)

	_, _, err := leader.Guard(context.Background(), "shoot--a")
	require.ErrorIs(t, err, ErrNotOwner, "before the manager made it the leader")
	assert.False(t, leader.Owns("shoot--a"))

	assert.Zero(t, readMetric(t, lastRenew.WithLabelValues("leader-metrics", "me")), "no renewal yet")
	assert.Equal(t, 1.0, readMetric(t, partitions.WithLabelValues("leader-metrics", "me")), "a group of one partition")
	require.NoError(t, lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	assert.Equal(t, 1000.0, readMetric(t, lastRenew.WithLabelValues("leader-metrics", "me")),
		"the leader lease's renewals show as the member lease's")
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- leader.Start(ctx) }()
	require.Eventually(t, func() bool { return leader.Owns("shoot--a") }, 5*time.Second, 10*time.Millisecond)
	assert.True(t, leader.Owns("shoot--zz"), "every namespace")
	assert.Equal(t, 0, leader.Partition("shoot--zz"))

	guarded, cancel, err := leader.Guard(context.Background(), "shoot--a")
	require.NoError(t, err)
	deadline, ok := guarded.Deadline()
	require.True(t, ok, "a write goes out bounded by the fence")
	assert.WithinDuration(t, time.Now().Add(10*time.Second), deadline, 2*time.Second)
	cancel()

	clk.SetTime(time.Unix(1010, 0))
	_, _, err = leader.Guard(context.Background(), "shoot--a")
	require.ErrorIs(t, err, ErrFenced, "no write at the fence moment")
	assert.True(t, leader.Owns("shoot--a"), "the work goes on while the process leads: a late renewal resumes the writes")
	clk.SetTime(time.Unix(1011, 0))
	require.NoError(t, lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	_, cancel, err = leader.Guard(context.Background(), "shoot--a")
	require.NoError(t, err, "a late renewal moves the fence on")
	cancel()

	stop()
	require.NoError(t, <-done)
	work.mu.Lock()
	defer work.mu.Unlock()
	assert.Equal(t, map[int]Takeover{0: {Cause: Crash}}, work.acquired, "one partition, taken over as after a crash")
	assert.Equal(t, []int{0}, work.released, "the work stopped before Start returned")
	require.Len(t, work.ctxs, 1)
	assert.Error(t, work.ctxs[0].Err(), "the work's context ended")
	_, _, err = leader.Guard(context.Background(), "shoot--a")
	require.ErrorIs(t, err, ErrNotOwner, "after it stopped leading")
}
