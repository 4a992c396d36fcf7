package sharding_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

// moveLog records every Acquired and Released of every member of a test with its time, and the
// spans during which a partition had no holder.
type moveLog struct {
	mu        sync.Mutex
	holder    map[int]string
	freeSince map[int]time.Time // partitions released and not acquired again yet
	moves     []move
	gaps      []gap
}

// move is one Acquired call.
type move struct {
	partition int
	member    string
	at        time.Time
	cause     sharding.TakeoverCause
}

// gap is a span during which a partition had no holder.
type gap struct {
	partition int
	from, to  time.Time
}

func newMoveLog() *moveLog {
	return &moveLog{holder: map[int]string{}, freeSince: map[int]time.Time{}}
}

func (l *moveLog) handler(member string) sharding.PartitionHandler {
	return moveRecorder{log: l, member: member}
}

type moveRecorder struct {
	log    *moveLog
	member string
}

func (h moveRecorder) Acquired(_ context.Context, p int, takeover sharding.Takeover) {
	l := h.log
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if since, ok := l.freeSince[p]; ok {
		l.gaps = append(l.gaps, gap{partition: p, from: since, to: now})
		delete(l.freeSince, p)
	}
	l.holder[p] = h.member
	l.moves = append(l.moves, move{partition: p, member: h.member, at: now, cause: takeover.Cause})
}

func (h moveRecorder) Released(p int) {
	l := h.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder[p] == h.member {
		delete(l.holder, p)
		l.freeSince[p] = time.Now()
	}
}

// movesSince returns the Acquired calls from index from on.
func (l *moveLog) movesSince(from int) []move {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]move(nil), l.moves[min(from, len(l.moves)):]...)
}

func (l *moveLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.moves)
}

// longestGapSince returns the longest span without a holder that began at or after since, counting
// spans still open up to now, and its partition.
func (l *moveLog) longestGapSince(since time.Time) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	longest, partition := time.Duration(0), -1
	consider := func(p int, from, to time.Time) {
		if !from.Before(since) && to.Sub(from) > longest {
			longest, partition = to.Sub(from), p
		}
	}
	for _, g := range l.gaps {
		consider(g.partition, g.from, g.to)
	}
	now := time.Now()
	for p, from := range l.freeSince {
		consider(p, from, now)
	}
	return longest, partition
}

// runnerOptions change one member of a group.
type runnerOptions struct {
	settings func(*config.Sharding)
	runner   func(*sharding.RunnerOptions)
	handlers []sharding.PartitionHandler
}

// startWith runs a member through a proxy of its own, like start, with the options applied. A fence
// that overruns fails the test instead of exiting the test binary.
func (g *group) startWith(name string, opts runnerOptions) *replica {
	s := g.settings
	s.MemberName = name
	if opts.settings != nil {
		opts.settings(&s)
	}
	cfg, proxy := test.ConfigThrough(g.t, env.Config)
	client, err := kubernetes.NewForConfig(sharding.LeaseClientConfig(cfg, s.PartitionCount))
	require.NoError(g.t, err)
	handlers := append([]sharding.PartitionHandler{g.work.handler(name)}, opts.handlers...)
	runnerOpts := sharding.RunnerOptions{Settings: s, Client: client, Handlers: handlers,
		Exit: func(code int) { g.t.Errorf("member %s exited with code %d: a fence overran", name, code) }}
	if opts.runner != nil {
		opts.runner(&runnerOpts)
	}
	runner := sharding.NewRunner(runnerOpts)
	r := &replica{name: name, runner: runner, proxy: proxy, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { defer close(r.done); _ = r.runner.Start(ctx) }()
	g.t.Cleanup(r.stop)
	return r
}

// owners maps every partition to its member.
func owners(held map[string][]int) map[int]string {
	out := map[int]string{}
	for m, ps := range held {
		for _, p := range ps {
			out[p] = m
		}
	}
	return out
}

// memberLeaseVersion reads the resourceVersion of a member lease from the API server directly, not
// through any member's proxy; "" when it does not exist.
func (g *group) memberLeaseVersion(t *testing.T, member string) string {
	t.Helper()
	l, err := g.admin(t).CoordinationV1().Leases(g.settings.Namespace).Get(context.Background(),
		leases.MemberLeaseName(g.settings.GroupName, member), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return l.ResourceVersion
}

var (
	adminOnce   sync.Once
	adminClient kubernetes.Interface
	adminErr    error
)

// admin returns a client that reaches the API server directly, as an administrator.
func (g *group) admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	adminOnce.Do(func() { adminClient, adminErr = kubernetes.NewForConfig(env.Config) })
	require.NoError(t, adminErr)
	return adminClient
}

// metricValue reads a counter or gauge of the sharding metrics for one member of group; 0 when the
// series does not exist.
func metricValue(t *testing.T, name, group, member string) float64 {
	t.Helper()
	return metricstest.Sum(t, name, map[string]string{"group": group, "member": member})
}

func TestRollingRestartMovesNoPartition(t *testing.T) {
	g := newGroup(t)
	g.settings.GroupName = "rollout"
	g.settings.LeaveMode = config.LeaveReturn
	g.settings.ReturnGrace = 30 * time.Second
	// Fewer partitions than the default: the test is about the protocol (nothing moves, and a
	// partition waits only for its member to come back), not about how fast the race detector lets
	// envtest take about 300 partition lease writes in one burst (up to 2 s measured).
	g.settings.PartitionCount = 97
	moves := newMoveLog()
	members := []string{"dwd-0", "dwd-1", "dwd-2"}
	replicas := map[string]*replica{}
	for _, m := range members {
		replicas[m] = g.startWith(m, runnerOptions{handlers: []sharding.PartitionHandler{moves.handler(m)}})
	}
	g.converge(t, 30*time.Second, members...)
	before := g.work.heldBy()
	owner := owners(before)
	mark := moves.mark()

	for _, m := range members {
		stopAt := time.Now()
		replicas[m].stop()
		stopped := time.Since(stopAt)
		replicas[m] = g.startWith(m, runnerOptions{handlers: []sharding.PartitionHandler{moves.handler(m)}})
		require.Eventually(t, func() bool { return replicas[m].runner.ReadyCheck(nil) == nil }, 20*time.Second, 10*time.Millisecond,
			"the restarted %s becomes ready", m)
		ready := time.Since(stopAt)
		assert.Equal(t, before, g.work.heldBy(), "after the restart of %s every partition is with its holder", m)
		longest, p := moves.longestGapSince(stopAt)
		assert.LessOrEqual(t, longest, ready+time.Second, "partition %d was unheld longer than the restart plus 1 s", p)
		t.Logf("restart of %s: stopped in %s, ready after %s; longest gap %s (partition %d)", m,
			stopped.Round(time.Millisecond), ready.Round(time.Millisecond), longest.Round(time.Millisecond), p)
	}
	for _, mv := range moves.movesSince(mark) {
		assert.Equal(t, owner[mv.partition], mv.member, "partition %d acquired by a member other than its holder", mv.partition)
	}
	assert.Equal(t, before, g.work.heldBy())
}

func TestAllMembersCutOffForFourLeasesResumeWithoutSteals(t *testing.T) {
	const outage = 4 * itLeaseDuration // long past every lease: 32 s (a minute showed nothing more)
	g := newGroup(t)
	g.settings.GroupName = "outage"
	moves := newMoveLog()
	members := []string{"dwd-0", "dwd-1", "dwd-2"}
	var replicas []*replica
	for _, m := range members {
		replicas = append(replicas, g.startWith(m, runnerOptions{handlers: []sharding.PartitionHandler{moves.handler(m)}}))
	}
	g.converge(t, 30*time.Second, members...)
	before := g.work.heldBy()
	owner := owners(before)
	mark := moves.mark()

	cutAt := time.Now()
	for _, r := range replicas {
		r.proxy.Cut()
	}
	require.Eventually(t, func() bool { return g.work.count() == 0 }, itRenewDeadline+time.Second, 10*time.Millisecond,
		"every member fences within the renew deadline")
	fenced := time.Since(cutAt)
	assert.Never(t, func() bool { return g.work.count() > 0 }, outage-time.Since(cutAt), 100*time.Millisecond,
		"no work runs during the outage")

	versions := map[string]string{}
	for _, m := range members {
		versions[m] = g.memberLeaseVersion(t, m)
	}
	for _, r := range replicas {
		r.proxy.Heal()
	}
	healAt := time.Now()
	unfencedAt := map[string]time.Time{}
	require.Eventually(t, func() bool {
		for _, m := range members {
			if _, ok := unfencedAt[m]; !ok && g.memberLeaseVersion(t, m) != versions[m] {
				unfencedAt[m] = time.Now()
			}
		}
		return len(unfencedAt) == len(members)
	}, 3*itRetryPeriod, 10*time.Millisecond, "every member renews once the connections heal")
	lastUnfenced := healAt
	for _, at := range unfencedAt {
		if at.After(lastUnfenced) {
			lastUnfenced = at
		}
	}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(before, g.work.heldBy()) },
		5*time.Second-time.Since(lastUnfenced), 10*time.Millisecond,
		"every partition is held again by its pre-outage holder within 5s of the last member unfencing")
	resumed := time.Since(lastUnfenced)
	for _, mv := range moves.movesSince(mark) {
		assert.Equal(t, owner[mv.partition], mv.member, "partition %d taken by a member other than its holder", mv.partition)
		assert.Equal(t, sharding.Resume, mv.cause, "partition %d", mv.partition)
	}
	t.Logf("fenced within %s of the cut; all members renewing %s after healing; all partitions held %s later",
		fenced.Round(time.Millisecond), lastUnfenced.Sub(healAt).Round(time.Millisecond), resumed.Round(time.Millisecond))
}

func TestDepartingMemberLeavesNoLease(t *testing.T) {
	t.Run("departing hook", func(t *testing.T) {
		// A member leaving for good releases every partition, so that the others take its share at
		// once and delete its member lease as soon as they see its clean-leave marker.
		g := newGroup(t)
		g.settings.GroupName = "depart-hook"
		g.startWith("dwd-0", runnerOptions{})
		g.startWith("dwd-1", runnerOptions{})
		leaving := g.startWith("dwd-2", runnerOptions{runner: func(r *sharding.RunnerOptions) {
			r.Departing = func(context.Context) (bool, error) { return true, nil } // a StatefulSet scale-down
		}})
		g.converge(t, 30*time.Second, "dwd-0", "dwd-1", "dwd-2")

		leaving.stop()
		g.converge(t, 3*time.Second, "dwd-0", "dwd-1")
		require.Eventually(t, func() bool { return g.memberLeaseVersion(t, "dwd-2") == "" }, itLeaseDuration+5*time.Second, 20*time.Millisecond,
			"the member lease of a member gone for good is deleted a lease duration after its clean-leave marker")
	})

	t.Run("handover mode", func(t *testing.T) {
		// --leave-mode=handover cannot tell a departure from a restart, so the member keeps its
		// released lease; the others delete it as orphaned once no partition lease names it.
		g := newGroup(t)
		g.settings.GroupName = "depart-handover"
		g.startWith("dwd-0", runnerOptions{})
		g.startWith("dwd-1", runnerOptions{})
		leaving := g.startWith("dwd-2", runnerOptions{settings: func(s *config.Sharding) { s.LeaveMode = config.LeaveHandover }})
		g.converge(t, 30*time.Second, "dwd-0", "dwd-1", "dwd-2")
		deletedBefore := metricValue(t, "dwd_sharding_orphaned_leases_deleted_total", g.settings.GroupName, "dwd-0") +
			metricValue(t, "dwd_sharding_orphaned_leases_deleted_total", g.settings.GroupName, "dwd-1")

		leaving.stop()
		g.converge(t, 3*time.Second, "dwd-0", "dwd-1")
		require.Eventually(t, func() bool { return g.memberLeaseVersion(t, "dwd-2") == "" }, itLeaseDuration+5*time.Second, 20*time.Millisecond,
			"the released member lease is deleted a lease duration after its clean-leave marker")
		deleted := func() float64 {
			return metricValue(t, "dwd_sharding_orphaned_leases_deleted_total", g.settings.GroupName, "dwd-0") +
				metricValue(t, "dwd_sharding_orphaned_leases_deleted_total", g.settings.GroupName, "dwd-1") - deletedBefore
		}
		// The counter moves right after the delete returns.
		assert.Eventually(t, func() bool { return deleted() == 1 }, time.Second, 10*time.Millisecond, "deleted by one of the others")
	})
}

// A rolling update that changes a setting: the first restarted member comes back with other settings.
// The incumbents win: the newcomer takes no member lease, is unready and says why, and the two others
// take its reserved share once the return grace ends; before, every member stopped changing anything
// and the share stayed unheld until a person stepped in (docs/sharding.md,
// "A setting changed by a rolling update anyway: the incumbents win").
func TestASettingsChangeRolledOutLeavesNoShareUnheld(t *testing.T) {
	g := newGroup(t)
	g.settings.GroupName = "settings-rollout"
	g.settings.LeaveMode = config.LeaveReturn
	g.settings.ReturnGrace = 3 * time.Second
	g.settings.PartitionCount = 97
	members := []string{"dwd-0", "dwd-1", "dwd-2"}
	replicas := map[string]*replica{}
	for _, m := range members {
		replicas[m] = g.startWith(m, runnerOptions{})
	}
	g.converge(t, 30*time.Second, members...)

	replicas["dwd-2"].stop()
	stopped := time.Now()
	changed := g.startWith("dwd-2", runnerOptions{settings: func(s *config.Sharding) { s.RingLoadBound = 1.10 }})
	g.converge(t, g.settings.ReturnGrace+itLeaseDuration+5*time.Second, "dwd-0", "dwd-1")
	t.Logf("the incumbents held dwd-2's share %s after it stopped", time.Since(stopped).Round(time.Millisecond))
	assert.ErrorContains(t, changed.runner.ReadyCheck(nil), "advertise other settings")
	for _, m := range []string{"dwd-0", "dwd-1"} {
		assert.NoError(t, replicas[m].runner.ReadyCheck(nil), "%s stays ready", m)
	}
	assert.Empty(t, g.work.heldBy()["dwd-2"])
}
