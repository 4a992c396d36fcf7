package leases_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newMember(store leases.Store, clk *clocktesting.FakeClock) *leases.Member {
	return &leases.Member{Store: store, Group: "dwd", Name: "dwd-0", Incarnation: "inc-1",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, Clock: clk}
}

func TestMemberRenewAndFence(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	assert.True(t, m.Fenced(t0), "fenced until the first renewal")

	require.NoError(t, m.Renew(ctx, t0))
	l, err := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	assert.Equal(t, "dwd-0", leases.Holder(l))
	assert.Equal(t, int32(15), *l.Spec.LeaseDurationSeconds)
	assert.Equal(t, map[string]string{leases.GroupLabel: "dwd", leases.KindLabel: leases.KindMember}, l.Labels)
	assert.Equal(t, "inc-1", leases.Incarnation(l))
	assert.False(t, m.Fenced(t0.Add(10*time.Second-time.Nanosecond)))
	assert.True(t, m.Fenced(t0.Add(10*time.Second)), "fenced exactly at the renew deadline")

	require.NoError(t, m.Renew(ctx, t0.Add(5*time.Second)))
	assert.Equal(t, t0.Add(15*time.Second), m.FenceAt())
	renewed, err := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	assert.NotEqual(t, l.ResourceVersion, renewed.ResourceVersion, "a renewal is visible to the others")
}

func TestMemberFencesBeforeTakingBackALeaseSomeoneElseWrote(t *testing.T) {
	for name, foreign := range map[string]func(store *leasestest.Store){
		"holder changed": func(store *leasestest.Store) {
			l, _ := store.Get(context.Background(), "dwd-member-dwd-0")
			l.Spec.HolderIdentity = ptr.To("someone-else")
			_, err := store.Update(context.Background(), l)
			require.NoError(t, err)
		},
		"holder cleared": func(store *leasestest.Store) {
			l, _ := store.Get(context.Background(), "dwd-member-dwd-0")
			l.Spec.HolderIdentity = nil
			_, err := store.Update(context.Background(), l)
			require.NoError(t, err)
		},
		"deleted": func(store *leasestest.Store) {
			require.NoError(t, store.Delete(context.Background(), "dwd-member-dwd-0", ""))
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := leasestest.NewStore()
			m := newMember(store, clocktesting.NewFakeClock(t0))
			require.NoError(t, m.Renew(ctx, t0))
			foreign(store)

			err := m.Renew(ctx, t0.Add(2*time.Second))
			require.ErrorIs(t, err, leases.ErrForeignWrite)
			assert.True(t, m.Fenced(t0.Add(2*time.Second)), "fenced before anything is taken back")

			require.NoError(t, m.Renew(ctx, t0.Add(4*time.Second)), "the next renewal takes the lease back")
			assert.Equal(t, "dwd-0", store.Holder("dwd-member-dwd-0"))
			assert.False(t, m.Fenced(t0.Add(4*time.Second)))
		})
	}
}

func TestMemberAdoptsItsOwnWriteWhoseAnswerWasLost(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	// A renewal reached the store but its answer was lost: the stored lease is this process's own.
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	_, err := store.Update(ctx, l)
	require.NoError(t, err)
	require.NoError(t, m.Renew(ctx, t0.Add(2*time.Second)))
	assert.False(t, m.Fenced(t0.Add(2*time.Second)), "no fence for a write of its own")
}

func TestReplacementWaitsForThePredecessorsLease(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	old := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, old.Renew(ctx, t0))
	replacement := newMember(store, clocktesting.NewFakeClock(t0))
	replacement.Incarnation = "inc-2"

	// The old process keeps renewing every 2 s: the replacement never takes the lease.
	for i := 1; i <= 20; i++ {
		now := t0.Add(time.Duration(i) * 2 * time.Second)
		require.NoError(t, old.Renew(ctx, now))
		require.ErrorIs(t, replacement.Renew(ctx, now.Add(time.Second)), leases.ErrWaitingForPredecessor)
	}
	// The old process stops renewing (cut off, or dead without proof): the replacement waits out a
	// full lease duration from when it first saw the last version, on its own clock.
	last := t0.Add(41 * time.Second)
	require.ErrorIs(t, replacement.Renew(ctx, last.Add(15*time.Second-time.Millisecond)), leases.ErrWaitingForPredecessor)
	require.NoError(t, replacement.Renew(ctx, last.Add(15*time.Second)))
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.Equal(t, "inc-2", leases.Incarnation(l))

	// The old one, should it still run somewhere, stops instead of fighting for the lease.
	err := old.Renew(ctx, last.Add(16*time.Second))
	require.ErrorIs(t, err, leases.ErrIdentityTaken)
	assert.True(t, old.Fenced(last.Add(16*time.Second)))
}

func TestReplacementHonoursTheAdvertisedDuration(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	old := newMember(store, clocktesting.NewFakeClock(t0))
	old.LeaseDuration = 30 * time.Second
	require.NoError(t, old.Renew(ctx, t0))
	replacement := newMember(store, clocktesting.NewFakeClock(t0))
	replacement.Incarnation = "inc-2"
	require.ErrorIs(t, replacement.Renew(ctx, t0), leases.ErrWaitingForPredecessor)
	require.ErrorIs(t, replacement.Renew(ctx, t0.Add(20*time.Second)), leases.ErrWaitingForPredecessor, "its own 15 s are not enough")
	require.NoError(t, replacement.Renew(ctx, t0.Add(30*time.Second)))
}

func TestReplacementTakesAtOnceWithProof(t *testing.T) {
	ctx := context.Background()
	t.Run("clean-leave marker", func(t *testing.T) {
		store := leasestest.NewStore()
		old := newMember(store, clocktesting.NewFakeClock(t0))
		require.NoError(t, old.Renew(ctx, t0))
		require.NoError(t, old.Release(ctx, t0.Add(time.Second), leases.Leave{Returning: 30 * time.Second}))
		replacement := newMember(store, clocktesting.NewFakeClock(t0))
		replacement.Incarnation = "inc-2"
		require.NoError(t, replacement.Renew(ctx, t0.Add(2*time.Second)))
		l, _ := store.Get(ctx, "dwd-member-dwd-0")
		assert.Equal(t, "inc-2", leases.Incarnation(l))
		assert.False(t, leases.AdvertOf("dwd-0", l).Left, "the new process's write clears the marker")
	})
	t.Run("same pod", func(t *testing.T) {
		store := leasestest.NewStore()
		old := newMember(store, clocktesting.NewFakeClock(t0))
		old.PodUID = "pod-1"
		require.NoError(t, old.Renew(ctx, t0))
		other := newMember(store, clocktesting.NewFakeClock(t0))
		other.Incarnation, other.PodUID = "inc-2", "pod-2"
		require.ErrorIs(t, other.Renew(ctx, t0.Add(time.Second)), leases.ErrWaitingForPredecessor, "another pod waits")
		restarted := newMember(store, clocktesting.NewFakeClock(t0))
		restarted.Incarnation, restarted.PodUID = "inc-3", "pod-1"
		require.NoError(t, restarted.Renew(ctx, t0.Add(time.Second)), "a container restart in the same pod takes over at once")
	})
}

// A proof that the predecessor stopped leaves nothing to wait for; the replacement's wait for an
// unchanged lease proves it too.
func TestAProvenTakeHasNoPredecessorToWaitFor(t *testing.T) {
	ctx := context.Background()
	t.Run("waited out", func(t *testing.T) {
		store := leasestest.NewStore()
		require.NoError(t, newMember(store, clocktesting.NewFakeClock(t0)).Renew(ctx, t0))
		replacement := newMember(store, clocktesting.NewFakeClock(t0))
		replacement.Incarnation = "inc-2"
		require.ErrorIs(t, replacement.Renew(ctx, t0.Add(time.Second)), leases.ErrWaitingForPredecessor)
		require.NoError(t, replacement.Renew(ctx, t0.Add(16*time.Second)))
		assert.True(t, replacement.PredecessorFencedBy().IsZero())
	})
	t.Run("clean-leave marker", func(t *testing.T) {
		store := leasestest.NewStore()
		old := newMember(store, clocktesting.NewFakeClock(t0))
		require.NoError(t, old.Renew(ctx, t0))
		require.NoError(t, old.Release(ctx, t0.Add(time.Second), leases.Leave{}))
		replacement := newMember(store, clocktesting.NewFakeClock(t0))
		replacement.Incarnation = "inc-2"
		require.NoError(t, replacement.Renew(ctx, t0.Add(2*time.Second)))
		assert.True(t, replacement.PredecessorFencedBy().IsZero())
	})
	t.Run("a deleted lease waited out", func(t *testing.T) {
		store := leasestest.NewStore()
		require.NoError(t, newMember(store, clocktesting.NewFakeClock(t0)).Renew(ctx, t0))
		replacement := newMember(store, clocktesting.NewFakeClock(t0))
		replacement.Incarnation = "inc-2"
		require.ErrorIs(t, replacement.Renew(ctx, t0.Add(time.Second)), leases.ErrWaitingForPredecessor, "it saw the lease")
		require.NoError(t, store.Delete(ctx, "dwd-member-dwd-0", ""))
		require.ErrorIs(t, replacement.Renew(ctx, t0.Add(2*time.Second)), leases.ErrWaitingForPredecessor)
		require.NoError(t, replacement.Renew(ctx, t0.Add(17*time.Second)))
		assert.True(t, replacement.PredecessorFencedBy().IsZero())
	})
	// A deletion is no renewal of the predecessor: the wait goes on from the version seen last, so the
	// deletion of an orphaned lease during it costs no second lease duration.
	t.Run("a deletion during the wait does not restart it", func(t *testing.T) {
		store := leasestest.NewStore()
		require.NoError(t, newMember(store, clocktesting.NewFakeClock(t0)).Renew(ctx, t0))
		replacement := newMember(store, clocktesting.NewFakeClock(t0))
		replacement.Incarnation = "inc-2"
		require.ErrorIs(t, replacement.Renew(ctx, t0.Add(time.Second)), leases.ErrWaitingForPredecessor, "it saw the lease")
		require.NoError(t, store.Delete(ctx, "dwd-member-dwd-0", ""))
		require.ErrorIs(t, replacement.Renew(ctx, t0.Add(10*time.Second)), leases.ErrWaitingForPredecessor)
		require.NoError(t, replacement.Renew(ctx, t0.Add(16*time.Second)), "a duration after the version was first seen")
		assert.True(t, replacement.PredecessorFencedBy().IsZero())
	})
	t.Run("a predecessor finds its deleted lease no renewal", func(t *testing.T) {
		store := leasestest.NewStore()
		old := newMember(store, clocktesting.NewFakeClock(t0))
		require.NoError(t, old.Renew(ctx, t0))
		require.NoError(t, store.Delete(ctx, "dwd-member-dwd-0", ""))
		require.Error(t, old.Renew(ctx, t0.Add(2*time.Second)), "its renewal fails (and it fences): no renewal the wait would miss")
		_, err := store.Get(ctx, "dwd-member-dwd-0")
		require.Error(t, err, "not created by the failed renewal")
	})
}

// A member lease deleted or cleared by someone proves nothing about the process that held it
// (docs/sharding.md, "A same-name replacement waits for proof"): a new process takes it at once, so
// that the group sees the name live, but the predecessor may act until its renew deadline, which ends
// before a lease duration after the take.
func TestAnUnprovenTakeSaysWhenThePredecessorIsFenced(t *testing.T) {
	ctx := context.Background()
	for name, foreign := range map[string]func(store *leasestest.Store){
		"deleted": func(store *leasestest.Store) {
			require.NoError(t, store.Delete(ctx, "dwd-member-dwd-0", ""))
		},
		"holder and incarnation cleared": func(store *leasestest.Store) {
			l, _ := store.Get(ctx, "dwd-member-dwd-0")
			l.Spec.HolderIdentity = nil
			delete(l.Annotations, leases.IncarnationAnnotation)
			_, err := store.Update(ctx, l)
			require.NoError(t, err)
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := leasestest.NewStore()
			require.NoError(t, newMember(store, clocktesting.NewFakeClock(t0)).Renew(ctx, t0))
			foreign(store)
			replacement := newMember(store, clocktesting.NewFakeClock(t0))
			replacement.Incarnation = "inc-2"
			require.NoError(t, replacement.Renew(ctx, t0.Add(time.Second)), "taken at once")
			assert.Equal(t, t0.Add(16*time.Second), replacement.PredecessorFencedBy())
		})
	}
}

func TestMemberAdvertisesItsSettings(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	m.LeaseDuration, m.Settings, m.PodUID = 15500*time.Millisecond, "partitions=7", "uid-1"
	require.NoError(t, m.Renew(ctx, t0))
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.Equal(t, int32(16), *l.Spec.LeaseDurationSeconds, "rounded up: the others must never wait less")
	assert.Equal(t, "partitions=7", l.Annotations[leases.SettingsAnnotation])
	assert.Equal(t, "uid-1", l.Annotations[leases.PodUIDAnnotation])
	assert.Equal(t, leases.Advert{Held: true, Duration: 16 * time.Second, Settings: "partitions=7"}, leases.AdvertOf("dwd-0", l))
}

func TestMemberRelease(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Release(ctx, t0, leases.Leave{}), "releasing a lease never taken is a no-op")
	require.NoError(t, m.Renew(ctx, t0))
	require.NoError(t, m.Release(ctx, t0.Add(time.Second), leases.Leave{StateLost: true}))
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.Equal(t, "", leases.Holder(l))
	assert.Equal(t, leases.Advert{Left: true, StateLost: true, Duration: 15 * time.Second}, leases.AdvertOf("dwd-0", l))
	assert.True(t, m.Fenced(t0.Add(time.Second)), "a released member must not act")
}

func TestMemberReturningReleaseKeepsItsHolder(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	require.NoError(t, m.Release(ctx, t0.Add(time.Second), leases.Leave{Returning: 30 * time.Second}))
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.Equal(t, "dwd-0", leases.Holder(l))
	assert.Equal(t, leases.Advert{Held: true, Left: true, Returning: 30 * time.Second, Duration: 15 * time.Second}, leases.AdvertOf("dwd-0", l))
}

// A process that runs without the group's role ends its predecessor's returning leave, and touches
// nothing else: no lease, a lease still held, a leave for good.
func TestForgoReturnEndsOnlyAReturningLeave(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	wrote, err := leases.ForgoReturn(ctx, store, "dwd", "dwd-0")
	require.NoError(t, err)
	assert.False(t, wrote, "no lease")

	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	wrote, err = leases.ForgoReturn(ctx, store, "dwd", "dwd-0")
	require.NoError(t, err)
	assert.False(t, wrote, "a held lease is its member's")
	held, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.Equal(t, leases.Advert{Held: true, Duration: 15 * time.Second}, leases.AdvertOf("dwd-0", held))

	require.NoError(t, m.Release(ctx, t0.Add(time.Second), leases.Leave{Returning: 30 * time.Second}))
	wrote, err = leases.ForgoReturn(ctx, store, "dwd", "dwd-0")
	require.NoError(t, err)
	assert.True(t, wrote)
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.Equal(t, leases.Advert{Left: true, Duration: 15 * time.Second}, leases.AdvertOf("dwd-0", l), "a leave for good")

	wrote, err = leases.ForgoReturn(ctx, store, "dwd", "dwd-0")
	require.NoError(t, err)
	assert.False(t, wrote, "a leave for good stays as it is")
}

func TestMemberViewStale(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	assert.False(t, m.ViewStale("", t0, 4*time.Second), "nothing written, nothing to miss")
	require.NoError(t, m.Renew(ctx, t0))
	first, _ := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, m.Renew(ctx, t0.Add(2*time.Second)))
	second, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.False(t, m.ViewStale(first.ResourceVersion, t0.Add(5*time.Second), 4*time.Second), "the second renewal is only 3 s old")
	assert.True(t, m.ViewStale(first.ResourceVersion, t0.Add(6*time.Second+time.Millisecond), 4*time.Second))
	assert.False(t, m.ViewStale(second.ResourceVersion, t0.Add(time.Minute), 4*time.Second), "the cache shows the latest")
	assert.True(t, m.ViewStale("", t0.Add(5*time.Second), 4*time.Second), "the cache shows no lease at all")
}

// A watch event can show a renewal before its answer: a cache at a version the member has not
// recorded yet, while its renewal waits for the answer, is judged as it was before the renewal.
func TestMemberViewStaleKeepsItsAnswerWhileARenewalWaitsForItsAnswer(t *testing.T) {
	ctx := context.Background()
	store := &answerLateStore{Store: leasestest.NewStore()}
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	require.NoError(t, m.Renew(ctx, t0.Add(2*time.Second)))
	second, _ := store.Get(ctx, "dwd-member-dwd-0")
	now := t0.Add(10 * time.Second)
	require.False(t, m.ViewStale(second.ResourceVersion, now, 4*time.Second), "the cache shows the latest")

	var beforeAnswer []bool
	at := now
	store.beforeAnswer = func(written *coordinationv1.Lease) {
		beforeAnswer = append(beforeAnswer, m.ViewStale(written.ResourceVersion, at, 4*time.Second))
	}
	require.NoError(t, m.Renew(ctx, now))
	assert.Equal(t, []bool{false}, beforeAnswer, "the cache shows the renewal whose answer is on its way")
	third, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.False(t, m.ViewStale(third.ResourceVersion, now, 4*time.Second))

	// A cache seen stale is judged by the last write it showed while the answer is on its way.
	at = now.Add(5 * time.Second)
	assert.True(t, m.ViewStale(second.ResourceVersion, at, 4*time.Second), "the third renewal is 5 s old")
	beforeAnswer = nil
	require.NoError(t, m.Renew(ctx, at))
	assert.Equal(t, []bool{true}, beforeAnswer)
	assert.True(t, m.ViewStale("unknown", at, 4*time.Second), "no renewal waits: a version not written here")

	// A cache that never showed a write of this process (a predecessor's version at the start)
	// stays stale while a renewal waits.
	fresh := &answerLateStore{Store: leasestest.NewStore()}
	n := newMember(fresh, clocktesting.NewFakeClock(t0))
	require.NoError(t, n.Renew(ctx, t0))
	var startAnswers []bool
	fresh.beforeAnswer = func(*coordinationv1.Lease) {
		startAnswers = append(startAnswers, n.ViewStale("predecessor's", t0.Add(5*time.Second), 4*time.Second))
	}
	require.NoError(t, n.Renew(ctx, t0.Add(5*time.Second)))
	assert.Equal(t, []bool{true}, startAnswers)
}

// answerLateStore calls beforeAnswer with each successful update before it answers.
type answerLateStore struct {
	leases.Store
	beforeAnswer func(written *coordinationv1.Lease)
}

func (s *answerLateStore) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	written, err := s.Store.Update(ctx, l)
	if err == nil && s.beforeAnswer != nil {
		s.beforeAnswer(written)
	}
	return written, err
}

// flakyStore fails every call while down is set.
type flakyStore struct {
	leases.Store
	down atomic.Bool
}

var errDown = errors.New("API server unreachable")

func (s *flakyStore) Get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.Get(ctx, name)
}

func (s *flakyStore) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.Update(ctx, l)
}

func TestMemberRunFencesAtTheRenewDeadline(t *testing.T) {
	store := &flakyStore{Store: leasestest.NewStore()}
	clk := clocktesting.NewFakeClock(t0)
	m := newMember(store, clk)
	var fences, failures atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		m.Run(ctx, leases.Hooks{OnFence: func() { fences.Add(1) }, OnRenewFailure: func(error) { failures.Add(1) }})
	})
	defer func() { cancel(); wg.Wait() }()

	// step waits until Run sleeps on the fake clock, then moves the clock on by d.
	step := func(d time.Duration) {
		require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
		clk.Step(d)
	}
	step(0)
	assert.False(t, m.Fenced(clk.Now()), "the first renewal takes the lease")
	store.down.Store(true)
	for range 4 {
		step(2 * time.Second) // t0+8s: the last successful renewal was sent at t0
	}
	assert.Equal(t, int32(0), fences.Load())
	step(2 * time.Second) // t0+10s: the renew deadline
	require.Eventually(t, func() bool { return fences.Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, failures.Load(), int32(4))

	store.down.Store(false)
	step(2 * time.Second)
	require.Eventually(t, func() bool { return !m.Fenced(clk.Now()) }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int32(1), fences.Load(), "one fence per loss of the lease")
}

func TestPartitionCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	a, err := leases.Acquire(ctx, store, "dwd", 7, 3, nil, "dwd-0", "inc-a", t0)
	require.NoError(t, err)
	assert.Equal(t, "dwd-partition-3", a.Name)
	assert.Equal(t, "dwd-0", leases.Holder(a))
	assert.Equal(t, "inc-a", leases.Incarnation(a))
	assert.Nil(t, a.Spec.LeaseDurationSeconds, "partition leases are never renewed periodically")

	_, err = leases.Acquire(ctx, store, "dwd", 7, 3, nil, "dwd-1", "inc-b", t0)
	assert.True(t, apierrors.IsAlreadyExists(err), "a second creator loses")

	handover := map[string]string{leases.HandoverAnnotationPrefix + "weeder": `[{"ns":"a"}]`}
	released, err := leases.Release(ctx, store, a, handover, "", t0.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, "", leases.Holder(released))
	assert.Equal(t, handover, leases.Handover(released), "the state travels in the release's own write")
	at, ok := leases.ReleasedAt(released)
	assert.True(t, ok)
	assert.Equal(t, t0.Add(time.Second), at)

	_, err = leases.Acquire(ctx, store, "dwd", 7, 3, a, "dwd-1", "inc-b", t0)
	assert.True(t, apierrors.IsConflict(err), "a stale copy cannot be swapped")
	b, err := leases.Acquire(ctx, store, "dwd", 7, 3, released, "dwd-1", "inc-b", t0.Add(2*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "dwd-1", leases.Holder(b))
	_, ok = leases.ReleasedAt(b)
	assert.False(t, ok)
	assert.Empty(t, leases.Handover(b), "the next holder's acquire consumes the handover")
	assert.Equal(t, int32(0), *b.Spec.LeaseTransitions, "taking a free lease is not a transition")

	c, err := leases.Acquire(ctx, store, "dwd", 7, 3, b, "dwd-2", "inc-c", t0.Add(3*time.Second))
	require.NoError(t, err)
	assert.Equal(t, int32(1), *c.Spec.LeaseTransitions)
}

// flap makes m fence leases.FlapFences times: its renewals succeed only every 11 s, one past the
// renew deadline.
func flap(ctx context.Context, m *leases.Member, store *flakyStore, clk *clocktesting.FakeClock, hooks leases.Hooks, fences *int) {
	for *fences < leases.FlapFences {
		store.down.Store(true)
		for clk.Now().Sub(t0)%(11*time.Second) != 0 || !m.Fenced(clk.Now()) {
			clk.Step(time.Second)
			m.Step(ctx, hooks)
		}
		store.down.Store(false)
		clk.Step(m.Step(ctx, hooks))
	}
}

func TestMemberStepsDownWhenItFencesTooOften(t *testing.T) {
	ctx := context.Background()
	mem := leasestest.NewStore()
	store := &flakyStore{Store: mem}
	clk := clocktesting.NewFakeClock(t0)
	m := newMember(store, clk)
	var fences int
	var downUntil time.Time
	hooks := leases.Hooks{OnFence: func() { fences++ }, OnRenewFailure: func(error) {},
		OnStepDown:  func(until time.Time) { downUntil = until },
		MayStepDown: func(time.Time) leases.StepDownAnswer { return leases.StepDown }}
	step := func() { clk.Step(m.Step(ctx, hooks)) }
	step()
	require.False(t, m.Fenced(clk.Now()))
	flap(ctx, m, store, clk, hooks, &fences)
	require.False(t, downUntil.IsZero(), "the third fence within ten lease durations steps down")
	assert.Equal(t, "", mem.Holder("dwd-member-dwd-0"), "the lease is released so that the others take over at once")
	released, _ := mem.Get(ctx, "dwd-member-dwd-0")
	assert.True(t, leases.AdvertOf("dwd-0", released).Left)
	assert.True(t, leases.AdvertOf("dwd-0", released).StateLost, "the fences stopped the work without handing its state over")
	for clk.Now().Before(downUntil) {
		step()
		assert.True(t, m.Fenced(clk.Now()), "no renewal until the window has passed")
	}
	m.Step(ctx, hooks)
	assert.False(t, m.Fenced(clk.Now()), "it comes back afterwards")
}

// A member that no other member could replace (it is alone, or they all fence with it in a brownout
// of the API server) does not step down, however often it fences (docs/sharding.md, "Gray failures").
func TestMemberStaysWhenNoOtherCouldTakeOver(t *testing.T) {
	for name, hook := range map[string]func(*flapping) leases.StepDownAnswer{
		"every other member fences too": func(*flapping) leases.StepDownAnswer { return leases.Stay },
		"no hook":                       nil,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := flapUntilAsked(hook)
			f.fences = 0
			flap(ctx, f.m, f.store, f.clk, f.hooks, &f.fences)
			assert.False(t, f.steppedDown)
			assert.False(t, f.m.Fenced(f.clk.Now()), "it renews again as soon as it can")
			l, err := f.store.Get(ctx, "dwd-member-dwd-0")
			require.NoError(t, err)
			assert.GreaterOrEqual(t, leases.AdvertOf("dwd-0", l).RecentFences, leases.FlapFences, "the others see it fence")
		})
	}
}

// A member that fenced too often asks the group, with the time of that fence, every round until the
// answer is known, and acts again meanwhile; an answer to step down that comes after it acts again
// fences it at once, before its lease is released. An answer that never comes is forgotten once the
// fences fall out of the window (docs/sharding.md, "Gray failures").
func TestMemberAsksWhetherToStepDownUntilTheAnswerIsKnown(t *testing.T) {
	for _, answer := range []leases.StepDownAnswer{leases.StepDown, leases.NotYetKnown} {
		ctx := context.Background()
		mem := leasestest.NewStore()
		store := &flakyStore{Store: mem}
		clk := clocktesting.NewFakeClock(t0)
		m := newMember(store, clk)
		fences, steppedDown, known, actingAtAFence := 0, false, false, false
		var asked []time.Time
		onFence := func() {
			fences++
			actingAtAFence = actingAtAFence || !m.Fenced(clk.Now())
		}
		hooks := leases.Hooks{OnFence: onFence, OnRenewFailure: func(error) {},
			OnStepDown: func(time.Time) { steppedDown = true },
			MayStepDown: func(at time.Time) leases.StepDownAnswer {
				asked = append(asked, at)
				if known {
					return answer
				}
				return leases.NotYetKnown
			}}
		clk.Step(m.Step(ctx, hooks))
		flap(ctx, m, store, clk, hooks, &fences)
		require.NotEmpty(t, asked)
		assert.False(t, steppedDown)
		assert.False(t, m.Fenced(clk.Now()), "it acts again while the answer is not known")
		for _, at := range asked {
			assert.Equal(t, asked[0], at, "asked with the time of the third fence")
		}
		known = true
		clk.Step(m.Step(ctx, hooks))
		if answer == leases.NotYetKnown {
			for clk.Now().Before(asked[0].Add(leases.FlapWindowDurations * 15 * time.Second)) {
				clk.Step(m.Step(ctx, hooks))
			}
			n := len(asked)
			clk.Step(m.Step(ctx, hooks))
			assert.False(t, steppedDown)
			assert.False(t, m.Fenced(clk.Now()))
			assert.Equal(t, n, len(asked), "the question is forgotten once the fences have left the window")
			continue
		}
		assert.True(t, steppedDown)
		assert.True(t, m.Fenced(clk.Now()), "fenced at once, not at the renew deadline")
		assert.Equal(t, leases.FlapFences+1, fences, "the work it resumed is stopped before the release")
		assert.False(t, actingAtAFence, "the member says it is fenced before its work is stopped, so that none starts again")
		clk.Step(m.Step(ctx, hooks))
		assert.Equal(t, "", mem.Holder("dwd-member-dwd-0"), "the lease is released")
	}
}

func TestMemberStopsRenewingWhileItsWorkLoopIsWedged(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(t0)
	m := newMember(store, clk)
	healthy, fences := true, 0
	hooks := leases.Hooks{OnFence: func() { fences++ }, OnRenewFailure: func(error) {}, Healthy: func() bool { return healthy }}
	clk.Step(m.Step(ctx, hooks))
	healthy = false
	for range 6 {
		clk.Step(m.Step(ctx, hooks))
	}
	assert.True(t, m.Fenced(clk.Now()))
	assert.Equal(t, 1, fences)
}

// An answer to step down that comes in the round whose renewal ended the outage (the member may act
// again from that renewal on, while the loop still records it fenced) stops the work again.
func TestAStepDownRightAfterTheRenewalThatUnfencedStopsTheWork(t *testing.T) {
	f := flapUntilAsked(func(f *flapping) leases.StepDownAnswer {
		if f.m.Fenced(f.clk.Now()) {
			return leases.NotYetKnown
		}
		return leases.StepDown
	})
	require.True(t, f.steppedDown)
	assert.Equal(t, leases.FlapFences+1, f.fences, "the work the renewal let resume is stopped")
	assert.True(t, f.m.Fenced(f.clk.Now()))
}

// flapping is a member made to fence leases.FlapFences times, with what its hooks saw.
type flapping struct {
	m           *leases.Member
	store       *flakyStore
	clk         *clocktesting.FakeClock
	hooks       leases.Hooks
	fences      int
	steppedDown bool
}

// flapUntilAsked makes a member fence leases.FlapFences times (flap), with answer as the group's
// answer (nil: no hook), and returns it.
func flapUntilAsked(answer func(*flapping) leases.StepDownAnswer) *flapping {
	ctx := context.Background()
	f := &flapping{store: &flakyStore{Store: leasestest.NewStore()}, clk: clocktesting.NewFakeClock(t0)}
	f.m = newMember(f.store, f.clk)
	f.hooks = leases.Hooks{OnFence: func() { f.fences++ }, OnRenewFailure: func(error) {},
		OnStepDown: func(time.Time) { f.steppedDown = true }}
	if answer != nil {
		f.hooks.MayStepDown = func(time.Time) leases.StepDownAnswer { return answer(f) }
	}
	f.clk.Step(f.m.Step(ctx, f.hooks))
	flap(ctx, f.m, f.store, f.clk, f.hooks, &f.fences)
	return f
}

// A leave announced is written at once, not at the next retry period: the renewal that carries it
// wakes the loop (the fake clock never moves here). Only the incarnation that wrote the marker counts
// as leaving.
func TestAnAnnouncedLeaveIsWrittenAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(t0)
	m := newMember(store, clk)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx, leases.Hooks{OnFence: func() {}}) }()
	require.Eventually(t, func() bool { return !m.Fenced(clk.Now()) }, 10*time.Second, time.Millisecond)
	l, err := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	assert.False(t, leases.AdvertOf("dwd-0", l).Leaving)
	assert.False(t, m.Announced())
	m.AnnounceLeave()
	require.Eventually(t, m.Announced, 10*time.Second, time.Millisecond)
	l, err = store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	assert.True(t, leases.AdvertOf("dwd-0", l).Leaving)
	l.Annotations[leases.IncarnationAnnotation] = "inc-2"
	assert.False(t, leases.AdvertOf("dwd-0", l).Leaving, "a marker another incarnation wrote")
	cancel()
	<-done
}

func TestMemberStepReportsRenewals(t *testing.T) {
	ctx := context.Background()
	store := &flakyStore{Store: leasestest.NewStore()}
	clk := clocktesting.NewFakeClock(t0)
	m := newMember(store, clk)
	var renewedAt []time.Time
	failures := 0
	hooks := leases.Hooks{OnFence: func() {}, OnRenewFailure: func(error) { failures++ },
		OnRenew: func(at time.Time) { renewedAt = append(renewedAt, at) }}

	m.Step(ctx, hooks)
	clk.Step(2 * time.Second)
	m.Step(ctx, hooks)
	store.down.Store(true)
	clk.Step(2 * time.Second)
	m.Step(ctx, hooks)

	assert.Equal(t, []time.Time{t0, t0.Add(2 * time.Second)}, renewedAt, "each successful renewal, at the time it was sent")
	assert.Equal(t, 1, failures, "a failed renewal is no renewal")
}

// TestMemberReleaseAfterItsOwnWriteWhoseAnswerWasLost: a renewal cut off by the stop may land after
// all; the leave is then written over it, not lost (the others would wait a lease duration).
func TestMemberReleaseAfterItsOwnWriteWhoseAnswerWasLost(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	_, err := store.Update(ctx, l) // the renewal whose answer was lost
	require.NoError(t, err)

	require.NoError(t, m.Release(ctx, t0.Add(time.Second), leases.Leave{Returning: 30 * time.Second}))
	released, err := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	assert.Equal(t, "inc-1", released.Annotations[leases.LeftAnnotation])
	assert.Equal(t, "30s", released.Annotations[leases.ReturningAnnotation])
}

// TestMemberReleaseLeavesAnotherIncarnationsLeaseAlone: a lease taken by another process of the
// same member is not marked as left by this one.
func TestMemberReleaseLeavesAnotherIncarnationsLeaseAlone(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	l, _ := store.Get(ctx, "dwd-member-dwd-0")
	l.Annotations[leases.IncarnationAnnotation] = "inc-2"
	_, err := store.Update(ctx, l)
	require.NoError(t, err)

	err = m.Release(ctx, t0.Add(time.Second), leases.Leave{Returning: 30 * time.Second})
	require.Error(t, err)
	stored, _ := store.Get(ctx, "dwd-member-dwd-0")
	assert.Empty(t, stored.Annotations[leases.LeftAnnotation])
	assert.Equal(t, "inc-2", leases.Incarnation(stored))
}

// A member whose processes keep ending without a leave soon after they joined (a crash loop, or exits
// on fence overruns in the same Pod) backs off from the third such end in a row, a lease duration
// doubled at each further one, so that the others keep its share meanwhile; a process that held the
// lease for CrashResetDurations durations, or a clean leave, ends the count (docs/sharding.md,
// "Crash loops").
func TestACrashLoopingMemberBacksOff(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	now := t0
	generation := 0
	// restart starts the next process in the same Pod (proof that the last one stopped), now, and
	// returns how long it waited before it took the lease.
	restart := func() (*leases.Member, time.Duration) {
		t.Helper()
		generation++
		m := newMember(store, clocktesting.NewFakeClock(now))
		m.Incarnation, m.PodUID = fmt.Sprintf("inc-%d", generation), "pod-1"
		began := now
		for err := m.Renew(ctx, now); err != nil; err = m.Renew(ctx, now) {
			require.ErrorIs(t, err, leases.ErrWaitingForPredecessor)
			require.Less(t, now.Sub(began), 10*time.Minute, "never took the lease")
			now = now.Add(time.Second)
		}
		return m, now.Sub(began)
	}
	crashes := func() string {
		l, err := store.Get(ctx, "dwd-member-dwd-0")
		require.NoError(t, err)
		return l.Annotations[leases.CrashesAnnotation]
	}

	_, waited := restart()
	assert.Zero(t, waited, "the first process")
	for i, want := range []time.Duration{0, 0, 15 * time.Second, 30 * time.Second, 60 * time.Second} {
		now = now.Add(20 * time.Second) // it crashes 20 s after it joined
		_, waited = restart()
		assert.Equal(t, want, waited, "after %d crashes in a row", i+1)
		assert.Equal(t, strconv.Itoa(i+1), crashes())
	}

	m, _ := restart() // the sixth crash: 2 min
	assert.Equal(t, "6", crashes())
	now = now.Add(leases.CrashResetDurations * 15 * time.Second)
	require.NoError(t, m.Renew(ctx, now))
	assert.Empty(t, crashes(), "held for ten durations: the count ends")
	now = now.Add(time.Second)
	_, waited = restart()
	assert.Zero(t, waited)
	assert.Equal(t, "1", crashes())

	// Three more crashes in a row (the third's successor waits 15 s), and a fourth: its successor
	// waits 30 s, and goes on waiting and counting when the others delete the lease meanwhile as an
	// orphan.
	for range 2 {
		now = now.Add(20 * time.Second)
		restart()
	}
	now = now.Add(20 * time.Second)
	generation++
	next := newMember(store, clocktesting.NewFakeClock(now))
	next.Incarnation, next.PodUID = fmt.Sprintf("inc-%d", generation), "pod-1"
	require.ErrorIs(t, next.Renew(ctx, now), leases.ErrWaitingForPredecessor)
	require.NoError(t, store.Delete(ctx, "dwd-member-dwd-0", ""))
	require.ErrorIs(t, next.Renew(ctx, now.Add(29*time.Second)), leases.ErrWaitingForPredecessor, "the back-off goes on")
	now = now.Add(30 * time.Second)
	require.NoError(t, next.Renew(ctx, now))
	assert.Equal(t, "4", crashes(), "and so does the count")

	m, _ = restart()
	require.NoError(t, m.Release(ctx, now, leases.Leave{Returning: time.Minute}))
	_, waited = restart()
	assert.Zero(t, waited, "after a clean leave")
	assert.Empty(t, crashes())
}

// slowAnswers answers each Update after moving the fake clock on by delay: the answer to a renewal
// comes that much after its send.
type slowAnswers struct {
	*flakyStore
	clk   *clocktesting.FakeClock
	delay time.Duration
}

func (s *slowAnswers) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out, err := s.flakyStore.Update(ctx, l)
	s.clk.Step(s.delay)
	return out, err
}

func TestContinuousSinceMovesOnlyWhenARenewalIsAnsweredTooLate(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	store := &slowAnswers{flakyStore: &flakyStore{Store: leasestest.NewStore()}, clk: clk}
	m := newMember(store, clk)
	require.Equal(t, 15*time.Second-5*time.Second/4, m.ContinuityWindow(), "D less a quarter of D − R")
	renewAt := func(at time.Duration) {
		t.Helper()
		clk.SetTime(t0.Add(at))
		require.NoError(t, m.Renew(ctx, clk.Now()))
	}

	renewAt(0)
	assert.Equal(t, t0, m.ContinuousSince(), "from the take's answer")
	renewAt(5 * time.Second)

	// The API server is gone: the renewals fail, the member fences at 15 s, and the renewal that
	// succeeds at 18 s is answered 13 s after the last successful send, inside the window.
	store.down.Store(true)
	for at := 7 * time.Second; at < 18*time.Second; at += 2 * time.Second {
		clk.SetTime(t0.Add(at))
		require.Error(t, m.Renew(ctx, clk.Now()))
	}
	assert.True(t, m.Fenced(t0.Add(17*time.Second)))
	store.down.Store(false)
	renewAt(18 * time.Second)
	assert.Equal(t, t0, m.ContinuousSince(), "fenced, but nobody can have judged the lease expired")

	// A renewal sent in time whose answer comes 14 s after the last send: someone may have.
	store.delay = 14 * time.Second
	renewAt(20 * time.Second)
	assert.Equal(t, t0.Add(34*time.Second), m.ContinuousSince(), "from the late answer on")
	store.delay = 0
	renewAt(36 * time.Second)
	assert.Equal(t, t0.Add(36*time.Second), m.ContinuousSince(), "16 s after the late renewal's send")
	renewAt(38 * time.Second)
	assert.Equal(t, t0.Add(36*time.Second), m.ContinuousSince(), "renewals in time keep it")
}

// TestOnlyRenewed: a steady renewal, as a member writes it, changes nothing the others read but the
// renewal time; a change of anything a member tells the others is more than a renewal.
func TestOnlyRenewed(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	m := newMember(store, clocktesting.NewFakeClock(t0))
	require.NoError(t, m.Renew(ctx, t0))
	before, err := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	require.NoError(t, m.Renew(ctx, t0.Add(2*time.Second)))
	after, err := store.Get(ctx, "dwd-member-dwd-0")
	require.NoError(t, err)
	require.NotEqual(t, before.ResourceVersion, after.ResourceVersion)
	assert.True(t, leases.OnlyRenewed(before, after), "a steady renewal")

	changes := map[string]func(l *coordinationv1.Lease){
		"holder":      func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("dwd-1") },
		"duration":    func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](30) },
		"acquired":    func(l *coordinationv1.Lease) { l.Spec.AcquireTime = l.Spec.RenewTime },
		"transitions": func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr.To[int32](7) },
		"incarnation": func(l *coordinationv1.Lease) { l.Annotations[leases.IncarnationAnnotation] = "inc-2" },
		"settings":    func(l *coordinationv1.Lease) { l.Annotations[leases.SettingsAnnotation] = "other" },
		"fences":      func(l *coordinationv1.Lease) { l.Annotations[leases.RecentFencesAnnotation] = "1" },
		"leaving":     func(l *coordinationv1.Lease) { l.Annotations[leases.LeavingAnnotation] = "inc-1" },
		"left":        func(l *coordinationv1.Lease) { l.Annotations[leases.LeftAnnotation] = "inc-1" },
		"labels":      func(l *coordinationv1.Lease) { l.Labels[leases.GroupLabel] = "other" },
		"uid":         func(l *coordinationv1.Lease) { l.UID = "another" },
		"deleting":    func(l *coordinationv1.Lease) { l.DeletionTimestamp = &metav1.Time{Time: t0} },
	}
	for name, change := range changes {
		changed := after.DeepCopy()
		change(changed)
		assert.False(t, leases.OnlyRenewed(before, changed), name)
	}
	assert.False(t, leases.OnlyRenewed(nil, after), "no earlier version")
}
