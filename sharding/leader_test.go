package sharding

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
	lock := NewLeader(LeaderOptions{Group: "fenced-lock", Member: "me", Lock: inner,
		RenewDeadline: 10 * time.Second, LeaseDuration: 15 * time.Second, Clock: clk}).Lock()
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
	// The metrics are the process's: a run before this one (go test -count=2) left its series.
	lastRenew.DeleteLabelValues("leader-metrics", "me")
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	leader := NewLeader(LeaderOptions{Group: "leader-metrics", Member: "me", Lock: &fakeLock{},
		RenewDeadline: 10 * time.Second, LeaseDuration: 15 * time.Second, Clock: clk})
	lock := leader.Lock()
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

func TestLeaderFenceKeepsTheMargin(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		renewDeadline, leaseDuration, want time.Duration
	}{
		{10000 * ms, 15000 * ms, 10000 * ms}, // the original's defaults: 5 s of margin
		{14500 * ms, 15000 * ms, 12000 * ms}, // accepted by the original's flags: 20 % of 15 s kept
		{14000 * ms, 15900 * ms, 11820 * ms}, // the candidates read 15 s; 20 % of 15.9 s is 3.18 s
		{9000 * ms, 10500 * ms, 7900 * ms},   // 10 s read, 2.1 s kept
		{4000 * ms, 5000 * ms, 3000 * ms},    // at least 2 s kept
		{2000 * ms, 3000 * ms, 1000 * ms},    // the shortest duration that leaves a window
		{1000 * ms, 2000 * ms, 0},            // no room: the flags are refused
		{50000 * ms, 60000 * ms, 48000 * ms}, // 20 % of 60 s is 12 s
		{20000 * ms, 60000 * ms, 20000 * ms}, // a long lease: the renew deadline decides
	} {
		assert.Equal(t, c.want, LeaderFenceWindow(c.renewDeadline, c.leaseDuration),
			"renew deadline %s, lease duration %s", c.renewDeadline, c.leaseDuration)
	}

	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	lock := NewLeader(LeaderOptions{Group: "fence-margin", Member: "me", Lock: &fakeLock{},
		RenewDeadline: 14500 * time.Millisecond, LeaseDuration: 15 * time.Second, Clock: clk}).Lock()
	require.NoError(t, lock.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	assert.Equal(t, time.Unix(1012, 0), lock.FenceAt(),
		"a candidate may take the lease 15 s after it saw the renewal: the leader stops 3 s before")
}

// releaseLock is a leader lock that, when asked to release, reports whether the write that passed the
// guard had ended by then.
type releaseLock struct {
	fakeLock
	writeEnded     <-chan struct{}
	endedAtRelease chan bool
}

func (l *releaseLock) Update(_ context.Context, record resourcelock.LeaderElectionRecord) error {
	if record.HolderIdentity == "" {
		select {
		case <-l.writeEnded:
			l.endedAtRelease <- true
		default:
			l.endedAtRelease <- false
		}
	}
	return nil
}

func TestALeaderReleaseEndsItsGuardedWritesFirst(t *testing.T) {
	writeEnded := make(chan struct{})
	inner := &releaseLock{writeEnded: writeEnded, endedAtRelease: make(chan bool, 1)}
	// A fake clock: the fence cannot pass while the test is starved of CPU (the mutation check runs it
	// beside the other tests at the lowest priority).
	leader := NewLeader(LeaderOptions{Group: "leader-release", Member: "me", Lock: inner,
		RenewDeadline: 10 * time.Second, LeaseDuration: 15 * time.Second, Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))})
	lock := leader.Lock()
	require.NoError(t, lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- leader.Start(ctx) }()
	defer func() { stop(); <-done }()
	require.Eventually(t, func() bool { return leader.Owns("shoot--a") }, 30*time.Second, 10*time.Millisecond)

	guarded, cancel, err := leader.Guard(context.Background(), "shoot--a")
	require.NoError(t, err)
	// The write: it hangs in its request until its context ends, then returns, and then its guard is
	// released (cancel), as a caller's deferred cancel runs after the write. Closing writeEnded after
	// cancel let the release, which waits for cancel, go out before the close: a flake of the test.
	go func() {
		<-guarded.Done()
		close(writeEnded)
		cancel()
	}()
	require.NoError(t, lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}))
	assert.True(t, <-inner.endedAtRelease, "the release went out only after the write that passed the guard had ended")
	_, _, err = leader.Guard(context.Background(), "shoot--a")
	require.ErrorIs(t, err, ErrFenced, "no write after a release")
}
