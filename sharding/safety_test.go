package sharding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// The safety tests of the sharding protocol, grouped under the rules they check (the headings below
// cite docs/sharding.md, "Rules, and what each protects against"): several processes, each a
// leases.Member and a Coordinator with a connection of its own, on one in-memory store, driven by one
// fake clock. A tick runs every process's member loop round (when due) and then every reconcile, as
// the Runner does, and moves the clock on.

var safetyT0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

const (
	safetyLease = 15 * time.Second
	safetyRenew = 10 * time.Second
	safetyRetry = 2 * time.Second
	safetyTick  = 200 * time.Millisecond
)

func safetyRing(partitions int) RingConfig {
	return RingConfig{PartitionCount: partitions, ReplicationFactor: DefaultReplicationFactor, LoadBound: DefaultLoadBound}
}

// safetyWork records which process acts on each partition, told apart by incarnation so that two
// processes under one name count as two, and fails the test when two act on one partition at once.
type safetyWork struct {
	t        *testing.T
	clk      *clocktesting.FakeClock
	mu       sync.Mutex
	acting   map[int]string // partition → incarnation
	names    map[string]string
	acquired []safetyAcquire
}

// safetyAcquire is one Acquired call.
type safetyAcquire struct {
	at                  time.Time
	partition           int
	member, incarnation string
	takeover            Takeover
}

type safetyHandler struct {
	work                *safetyWork
	member, incarnation string
}

func (h safetyHandler) Acquired(_ context.Context, p int, takeover Takeover) {
	w := h.work
	w.mu.Lock()
	defer w.mu.Unlock()
	if other, ok := w.acting[p]; ok && other != h.incarnation {
		w.t.Errorf("partition %d acted on by %s and %s at once", p, other, h.incarnation)
	}
	w.acting[p] = h.incarnation
	w.acquired = append(w.acquired, safetyAcquire{at: w.clk.Now(), partition: p, member: h.member,
		incarnation: h.incarnation, takeover: takeover})
}

func (h safetyHandler) Released(p int) {
	w := h.work
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.acting[p] == h.incarnation {
		delete(w.acting, p)
	}
}

// heldBy returns the partitions acted on, by member name.
func (w *safetyWork) heldBy() map[string][]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	by := map[string][]int{}
	for p, inc := range w.acting {
		by[w.names[inc]] = append(by[w.names[inc]], p)
	}
	for _, ps := range by {
		sort.Ints(ps)
	}
	return by
}

// acquiredSince returns the Acquired calls from index from on.
func (w *safetyWork) acquiredSince(from int) []safetyAcquire {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acquired[min(from, len(w.acquired)):])
}

func (w *safetyWork) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acquired)
}

// forget drops what a crashed process was doing: its work is gone with it.
func (w *safetyWork) forget(incarnation string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, inc := range w.acting {
		if inc == incarnation {
			delete(w.acting, p)
		}
	}
}

// errUnreachable is a connection that does not reach the store.
var errUnreachable = errors.New("dial tcp: connection refused")

// safetyStore is one process's connection to the shared store: fault, when set, may fail a call
// before it reaches the store (op is get, create, update or delete). It counts the partition lease
// writes that reached the store.
type safetyStore struct {
	store           *leasestest.Store
	mu              sync.Mutex
	fault           func(op string, lease *coordinationv1.Lease) error
	partitionWrites atomic.Int64
}

func (s *safetyStore) setFault(fault func(op string, lease *coordinationv1.Lease) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = fault
}

// cut fails every call until heal.
func (s *safetyStore) cut() {
	s.setFault(func(string, *coordinationv1.Lease) error { return errUnreachable })
}

func (s *safetyStore) heal() { s.setFault(nil) }

func (s *safetyStore) inject(op string, lease *coordinationv1.Lease) error {
	s.mu.Lock()
	fault := s.fault
	s.mu.Unlock()
	if fault == nil {
		return nil
	}
	return fault(op, lease)
}

func (s *safetyStore) counted(lease *coordinationv1.Lease, err error) {
	if err == nil && lease.Labels[leases.KindLabel] == leases.KindPartition {
		s.partitionWrites.Add(1)
	}
}

func (s *safetyStore) Get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	if err := s.inject("get", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		return nil, err
	}
	return s.store.Get(ctx, name)
}

func (s *safetyStore) Create(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if err := s.inject("create", lease); err != nil {
		return nil, err
	}
	out, err := s.store.Create(ctx, lease)
	s.counted(lease, err)
	return out, err
}

func (s *safetyStore) Update(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if err := s.inject("update", lease); err != nil {
		return nil, err
	}
	out, err := s.store.Update(ctx, lease)
	s.counted(lease, err)
	return out, err
}

func (s *safetyStore) Delete(ctx context.Context, name, resourceVersion string) error {
	if err := s.inject("delete", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		return err
	}
	return s.store.Delete(ctx, name, resourceVersion)
}

// isReleaseWrite reports whether a write is a partition release (it clears the holder).
func isReleaseWrite(op string, lease *coordinationv1.Lease) bool {
	return op == "update" && lease.Labels[leases.KindLabel] == leases.KindPartition && leases.Holder(lease) == ""
}

// frozenLister is a cache that stops updating while frozen: it keeps listing what the store held
// when it froze.
type frozenLister struct {
	store  *leasestest.Store
	mu     sync.Mutex
	frozen []*coordinationv1.Lease
}

func (l *frozenLister) List() []*coordinationv1.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen != nil {
		return l.frozen
	}
	return l.store.List()
}

func (l *frozenLister) freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frozen = l.store.List()
}

func (l *frozenLister) thaw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frozen = nil
}

// safetyProc is one process: a member lease loop and, unless bare, a coordinator.
type safetyProc struct {
	g                 *safetyGroup
	name, incarnation string
	conn              *safetyStore
	member            *leases.Member
	coord             *Coordinator // nil for a bare member that only renews its lease
	nextRenew         time.Time
	cancel            context.CancelFunc

	mu        sync.Mutex
	events    []string // type/reason of the Events the coordinator recorded
	notes     []string // type/reason/action: message of the same Events
	renewErrs []error
}

func (p *safetyProc) event(eventType, reason, action, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, eventType+"/"+reason)
	p.notes = append(p.notes, eventType+"/"+reason+"/"+action+": "+message)
}

// eventNotes returns the Events recorded as type/reason/action: message.
func (p *safetyProc) eventNotes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.notes)
}

func (p *safetyProc) eventsRecorded() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

func (p *safetyProc) renewFailed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.renewErrs = append(p.renewErrs, err)
}

// renewRound runs the member loop's round when it is due, with the coordinator's Fence as OnFence.
func (p *safetyProc) renewRound(ctx context.Context) {
	now := p.g.clk.Now()
	if now.Before(p.nextRenew) {
		return
	}
	hooks := leases.Hooks{OnFence: func() {}, OnRenewFailure: p.renewFailed}
	if p.coord != nil {
		hooks.OnFence = p.coord.Fence
	}
	p.nextRenew = now.Add(p.member.Step(ctx, hooks))
}

// held returns the partitions whose work runs in this process, sorted.
func (p *safetyProc) held() []int {
	held := p.coord.Held()
	sort.Ints(held)
	return held
}

// safetyGroup is the processes of one group on one store and one fake clock.
type safetyGroup struct {
	t       *testing.T
	name    string
	store   *leasestest.Store
	clk     *clocktesting.FakeClock
	ring    RingConfig
	work    *safetyWork
	running []*safetyProc
	gen     int
}

// newSafetyGroup returns an empty group; name also keeps its members' metrics apart from other tests'.
func newSafetyGroup(t *testing.T, name string, partitions int) *safetyGroup {
	clk := clocktesting.NewFakeClock(safetyT0)
	store := leasestest.NewStore()
	store.Now = clk.Now
	return &safetyGroup{t: t, name: name, store: store, clk: clk, ring: safetyRing(partitions),
		work: &safetyWork{t: t, clk: clk, acting: map[int]string{}, names: map[string]string{}}}
}

// safetyOptions change how a process starts; the zero value is the group's settings.
type safetyOptions struct {
	ring     *RingConfig
	roles    []string
	podUID   string
	lister   Lister // the store itself (an up-to-date cache) when nil
	handlers []PartitionHandler
	bare     bool        // a member lease loop without a coordinator
	log      logr.Logger // the coordinator's; discarded when zero
}

// start boots a process under name with a new incarnation.
func (g *safetyGroup) start(name string, opts safetyOptions) *safetyProc {
	g.gen++
	inc := fmt.Sprintf("%s/%d", name, g.gen)
	ring := g.ring
	if opts.ring != nil {
		ring = *opts.ring
	}
	settings := Settings(ring, opts.roles)
	p := &safetyProc{g: g, name: name, incarnation: inc, conn: &safetyStore{store: g.store}, nextRenew: g.clk.Now()}
	p.member = &leases.Member{Store: p.conn, Group: g.name, Name: name, Incarnation: inc,
		LeaseDuration: safetyLease, RenewDeadline: safetyRenew, RetryPeriod: safetyRetry, Clock: g.clk,
		Settings: settings, PodUID: opts.podUID}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	g.t.Cleanup(cancel)
	if !opts.bare {
		var lister Lister = g.store
		if opts.lister != nil {
			lister = opts.lister
		}
		g.work.mu.Lock()
		g.work.names[inc] = name
		g.work.mu.Unlock()
		handlers := append([]PartitionHandler{safetyHandler{work: g.work, member: name, incarnation: inc}}, opts.handlers...)
		log := opts.log
		if log.GetSink() == nil {
			log = logr.Discard()
		}
		p.coord = NewCoordinator(Config{Group: g.name, Member: name, Incarnation: inc, Ring: ring,
			LeaseDuration: safetyLease, RetryPeriod: safetyRetry, WriteConcurrency: 1, Settings: settings, Event: p.event,
			WorkContext: ctx, Store: p.conn, Lister: lister, Liveness: p.member, Clock: g.clk, Log: log, Handlers: handlers})
		p.member.MayJoin = p.coord.MayJoin
	}
	g.running = append(g.running, p)
	return p
}

// tick runs every process's member loop round when due, then every reconcile, and moves the clock
// on by safetyTick. Reconcile errors are those of injected faults; the next reconcile retries.
func (g *safetyGroup) tick() {
	ctx := context.Background()
	for _, p := range g.running {
		p.renewRound(ctx)
	}
	for _, p := range g.running {
		if p.coord != nil {
			_, _ = p.coord.Reconcile(ctx)
		}
	}
	g.clk.Step(safetyTick)
}

// runFor ticks for d.
func (g *safetyGroup) runFor(d time.Duration) {
	for end := g.clk.Now().Add(d); g.clk.Now().Before(end); {
		g.tick()
	}
}

// runUntil ticks until done holds and returns how long that took on the fake clock; it fails the
// test when done does not hold within.
func (g *safetyGroup) runUntil(within time.Duration, done func() bool, what string) time.Duration {
	g.t.Helper()
	start := g.clk.Now()
	for !done() {
		if g.clk.Since(start) > within {
			g.t.Fatalf("%s: not within %s; partitions acted on: %v", what, within, g.work.heldBy())
		}
		g.tick()
	}
	return g.clk.Since(start)
}

// remove takes a process out of the ticks.
func (g *safetyGroup) remove(p *safetyProc) {
	g.running = slices.DeleteFunc(g.running, func(q *safetyProc) bool { return q == p })
}

// leave stops a process gracefully, as Runner.shutdown does: the work of every partition stopped and
// handed over (kept reserved when returning is above zero), then the clean-leave marker written.
func (g *safetyGroup) leave(p *safetyProc, returning time.Duration) {
	g.t.Helper()
	ctx := context.Background()
	lost, err := p.coord.Leave(ctx, returning > 0)
	require.NoError(g.t, err)
	g.remove(p)
	require.NoError(g.t, p.member.Release(ctx, g.clk.Now(), leases.Leave{Returning: returning, StateLost: lost}))
	p.cancel()
}

// crash ends a process at once: it writes nothing more, and its work is gone with it.
func (g *safetyGroup) crash(p *safetyProc) {
	g.remove(p)
	p.cancel()
	g.work.forget(p.incarnation)
}

// ringOf is the assignment of the ring over members, by member.
func (g *safetyGroup) ringOf(members ...string) map[string][]int {
	ring, err := NewRing(members, g.ring)
	require.NoError(g.t, err)
	want := map[string][]int{}
	for _, m := range members {
		if ps := ring.PartitionsOf(m); len(ps) > 0 {
			want[m] = ps
		}
	}
	return want
}

// converged reports whether the work runs exactly as the ring over members says.
func (g *safetyGroup) converged(members ...string) func() bool {
	want := g.ringOf(members...)
	return func() bool { return assert.ObjectsAreEqual(want, g.work.heldBy()) }
}

func (g *safetyGroup) memberLeaseName(member string) string {
	return leases.MemberLeaseName(g.name, member)
}

// partitionWrites counts the partition lease writes in the store from event index from on.
func (g *safetyGroup) partitionWrites(from int) int {
	n := 0
	for _, e := range g.store.Events(from) {
		if e.Lease.Labels[leases.KindLabel] == leases.KindPartition {
			n++
		}
	}
	return n
}

func (g *safetyGroup) writesSoFar() int {
	return len(g.store.Events(0))
}

// shootSample returns n shoot namespace names, shoot--<project>--<shoot>.
func shootSample(n int) []string {
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, fmt.Sprintf("shoot--p%03d--s%02d", i/50, i%50))
	}
	return out
}

// docs/sharding.md, "Members that disagree never share a ring".

func TestMembersWithDifferentPartitionCountsNeverOwnTheSameNamespace(t *testing.T) {
	namespaces := shootSample(5000)
	for _, tc := range []struct {
		name     string
		together bool
	}{
		{name: "joining a running group"},
		{name: "starting together", together: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newSafetyGroup(t, fmt.Sprintf("skew-p-%t", tc.together), 887)
			old := g.start("dwd-0", safetyOptions{})
			if !tc.together {
				g.runUntil(time.Minute, func() bool { return len(old.coord.Held()) == 887 }, "the first member holds every partition")
			}
			ring1021 := safetyRing(1021)
			bumped := g.start("dwd-1", safetyOptions{ring: &ring1021})
			g.runFor(3 * safetyLease)

			both := 0
			for _, ns := range namespaces {
				if old.coord.Owns(ns) && bumped.coord.Owns(ns) {
					both++
				}
			}
			assert.Zero(t, both, "namespaces owned by both members out of %d", len(namespaces))
			assert.Empty(t, bumped.coord.Held(), "the member with the other partition count acquires nothing")
			if !tc.together {
				assert.Len(t, old.coord.Held(), 887, "the first member keeps what it holds")
			}
			assert.Zero(t, readMetric(t, settingsMismatch.WithLabelValues(g.name, "dwd-0")),
				"dwd-0 never sees the newcomer, which does not join while it disagrees")
			assert.Equal(t, 1.0, readMetric(t, settingsMismatch.WithLabelValues(g.name, "dwd-1")), "dwd-1 sees dwd-0 live with other settings")
		})
	}
}

// Incumbents win a disagreement on the settings (docs/sharding.md,
// "A setting changed by a rolling update anyway: the incumbents win"): a newcomer with other settings
// does not take its member lease, so the group goes on, takes the share of a member that leaves, and
// the newcomer joins only once no live member disagrees.
func TestANewcomerWithOtherSettingsDoesNotJoin(t *testing.T) {
	g := newSafetyGroup(t, "skew-ring", 61)
	a := g.start("dwd-0", safetyOptions{})
	c := g.start("dwd-2", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-2"), "two members converge")
	before := g.work.heldBy()
	writes := g.writesSoFar()

	// A member with another ring load bound comes: the two rings would disagree on owners.
	skewed := g.ring
	skewed.LoadBound = 1.10
	b := g.start("dwd-1", safetyOptions{ring: &skewed})
	g.runFor(2 * safetyLease)
	assert.Equal(t, before, g.work.heldBy(), "nobody releases or acquires anything")
	assert.Zero(t, g.partitionWrites(writes), "no partition lease is written")
	_, err := g.store.Get(context.Background(), leases.MemberLeaseName(g.name, "dwd-1"))
	assert.True(t, apierrors.IsNotFound(err), "the newcomer takes no member lease: %v", err)
	for _, m := range []struct {
		p    *safetyProc
		want float64
	}{{a, 0}, {c, 0}, {b, 2}} {
		assert.Equal(t, m.want, readMetric(t, settingsMismatch.WithLabelValues(g.name, m.p.name)), m.p.name)
	}
	assert.Empty(t, a.eventsRecorded(), "the incumbents never see the newcomer")
	assert.Equal(t, []string{corev1.EventTypeWarning + "/SettingsMismatch"}, b.eventsRecorded(), "one Event when the refusal begins")
	assert.Contains(t, b.eventNotes()[0], "/Rebalance: Live members of the group advertise other settings", "with its action")
	assert.Contains(t, b.coord.JoinRefused(), "dwd-0 advertises")

	// dwd-2 leaves: the incumbent takes its share, as without the newcomer.
	g.leave(c, 0)
	g.runUntil(10*time.Second, g.converged("dwd-0"), "the incumbent takes the share of the member that left")

	// dwd-0 leaves too: the newcomer joins and takes everything.
	g.leave(a, 0)
	g.runUntil(time.Minute, g.converged("dwd-1"), "the newcomer takes every partition once no live member disagrees")
	assert.Zero(t, readMetric(t, settingsMismatch.WithLabelValues(g.name, "dwd-1")))
	assert.Equal(t, []string{corev1.EventTypeWarning + "/SettingsMismatch", corev1.EventTypeNormal + "/SettingsAgree"}, b.eventsRecorded(),
		"one Event when the refusal begins, none while it lasts, and a Normal one when it ends")
}

// Members that joined with other settings (processes without the join rule, or started at once)
// still change nothing while they disagree.
func TestMembersSeeingOtherSettingsChangeNothing(t *testing.T) {
	g := newSafetyGroup(t, "skew-joined", 61)
	a := g.start("dwd-0", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0"), "one member converges")
	before := g.work.heldBy()
	writes := g.writesSoFar()
	skewed := g.ring
	skewed.LoadBound = 1.10
	b := g.start("dwd-1", safetyOptions{ring: &skewed})
	b.member.MayJoin = nil // an older dwd
	g.runFor(2 * safetyLease)
	assert.Equal(t, before, g.work.heldBy(), "nobody releases or acquires anything")
	assert.Zero(t, g.partitionWrites(writes), "no partition lease is written")
	assert.Equal(t, 1.0, readMetric(t, settingsMismatch.WithLabelValues(g.name, "dwd-0")))
	assert.Equal(t, []string{corev1.EventTypeWarning + "/SettingsMismatch"}, a.eventsRecorded())
	assert.Contains(t, a.eventNotes()[0], "/Rebalance: Members with other settings are live", "with its action")
	g.leave(b, 0)
	g.runFor(safetyLease)
	assert.Equal(t, []string{corev1.EventTypeWarning + "/SettingsMismatch", corev1.EventTypeNormal + "/SettingsAgree"}, a.eventsRecorded())
}

func TestMembersWithDisjointRolesNeverShareARing(t *testing.T) {
	g := newSafetyGroup(t, "skew-roles", 61)
	prober := g.start("dwd-prober-0", safetyOptions{roles: []string{"prober"}})
	g.runUntil(time.Minute, g.converged("dwd-prober-0"), "the prober holds every partition")
	writes := g.writesSoFar()

	weeder := g.start("dwd-weeder-0", safetyOptions{roles: []string{"weeder"}})
	g.runFor(3 * safetyLease)
	assert.Empty(t, weeder.coord.Held(), "the weeder acquires nothing")
	assert.Len(t, prober.coord.Held(), 61, "the prober keeps every partition")
	assert.Zero(t, g.partitionWrites(writes), "no partition lease is written")
	assert.Equal(t, 1.0, readMetric(t, settingsMismatch.WithLabelValues(g.name, "dwd-weeder-0")))
	assert.Empty(t, prober.eventsRecorded(), "the weeder never joined")
	assert.Contains(t, weeder.eventsRecorded(), corev1.EventTypeWarning+"/SettingsMismatch")
}

// docs/sharding.md, "A same-name replacement waits for proof": a second process under the same name.

func TestReplacementUnderTheSameNameStartsNothingWhileTheOldProcessRenews(t *testing.T) {
	g := newSafetyGroup(t, "same-name", 31)
	old := g.start("dwd-0", safetyOptions{})
	g.start("dwd-1", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "two members converge")
	before := g.work.heldBy()

	replacement := g.start("dwd-0", safetyOptions{})
	g.runFor(3 * safetyLease)
	for _, a := range g.work.acquiredSince(0) {
		assert.NotEqual(t, replacement.incarnation, a.incarnation, "the replacement started partition %d", a.partition)
	}
	assert.Empty(t, replacement.coord.Held())
	assert.True(t, replacement.member.Fenced(g.clk.Now()), "the replacement has not taken the member lease")
	assert.Equal(t, before, g.work.heldBy(), "the old process keeps acting on its partitions")
	replacement.mu.Lock()
	require.NotEmpty(t, replacement.renewErrs)
	assert.ErrorIs(t, replacement.renewErrs[len(replacement.renewErrs)-1], leases.ErrWaitingForPredecessor)
	replacement.mu.Unlock()

	// The old process dies without a trace: the replacement takes over once the lease has been
	// unchanged for the lease duration, and not before. (dwd-1 may take the partitions first, as
	// from any crashed member, and hand them back.)
	mark := g.work.mark()
	crashed := g.clk.Now()
	g.crash(old)
	g.runUntil(safetyLease+5*time.Second, g.converged("dwd-0", "dwd-1"), "the replacement takes over")
	first := time.Time{}
	for _, a := range g.work.acquiredSince(mark) {
		if a.incarnation == replacement.incarnation && first.IsZero() {
			first = a.at
		}
	}
	require.False(t, first.IsZero(), "the replacement acquired partitions")
	assert.GreaterOrEqual(t, first.Sub(crashed), safetyLease-safetyRetry,
		"the replacement waits out the lease its predecessor renewed last")
}

// docs/sharding.md, "Holders notice foreign writes": foreign writes on a held partition lease.

func TestHolderStopsWhenItsPartitionLeaseChangesUnderIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		foreign func(t *testing.T, store *leasestest.Store, name string)
	}{
		{name: "deleted and created by another holder", foreign: func(t *testing.T, store *leasestest.Store, name string) {
			stored, err := store.Get(context.Background(), name)
			require.NoError(t, err)
			require.NoError(t, store.Delete(context.Background(), name, ""))
			recreated := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: stored.Labels,
				Annotations: map[string]string{leases.IncarnationAnnotation: "someone"}}}
			recreated.Spec.HolderIdentity = ptr.To("other")
			_, err = store.Create(context.Background(), recreated)
			require.NoError(t, err)
		}},
		{name: "holder edited", foreign: func(t *testing.T, store *leasestest.Store, name string) {
			stored, err := store.Get(context.Background(), name)
			require.NoError(t, err)
			stored.Spec.HolderIdentity = ptr.To("other")
			_, err = store.Update(context.Background(), stored)
			require.NoError(t, err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newSafetyGroup(t, "foreign-"+tc.name[:7], 31)
			a := g.start("dwd-0", safetyOptions{})
			// "other" is a live member of the group that runs no partitions.
			g.start("other", safetyOptions{bare: true})
			g.runUntil(time.Minute, func() bool { return assert.ObjectsAreEqual(g.ringOf("dwd-0", "other")["dwd-0"], a.held()) },
				"dwd-0 holds its share")
			g.runFor(time.Second)
			p := a.held()[0]
			foreignBefore := readMetric(t, foreignWrites.WithLabelValues(g.name, "dwd-0"))

			tc.foreign(t, g.store, leases.PartitionLeaseName(g.name, p))
			writes := g.writesSoFar()
			_, err := a.coord.Reconcile(context.Background())
			require.NoError(t, err)

			assert.False(t, a.coord.Holds(p), "the work of partition %d stops", p)
			assert.NotContains(t, g.work.heldBy()["dwd-0"], p, "its handlers were told")
			assert.Equal(t, writes, g.writesSoFar(), "nothing is written")
			assert.Equal(t, "other", g.store.Holder(leases.PartitionLeaseName(g.name, p)))
			assert.Equal(t, foreignBefore+1, readMetric(t, foreignWrites.WithLabelValues(g.name, "dwd-0")))
			assert.Contains(t, a.eventsRecorded(), corev1.EventTypeWarning+"/PartitionLeaseTaken")
			assert.Len(t, a.held(), len(g.ringOf("dwd-0", "other")["dwd-0"])-1, "the other partitions go on")
		})
	}
}

// docs/sharding.md, "Writes are fenced, not only the work".

func TestGuardRefusesAfterTheFenceMomentAndOutsideTheHeldPartitions(t *testing.T) {
	g := newSafetyGroup(t, "guard", 31)
	a := g.start("dwd-0", safetyOptions{})
	g.start("dwd-1", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "two members converge")
	var mine, notMine string
	for _, ns := range shootSample(200) {
		if a.coord.Holds(a.coord.Partition(ns)) {
			mine = ns
		} else {
			notMine = ns
		}
	}
	require.NotEmpty(t, mine)
	require.NotEmpty(t, notMine)
	refusedBefore := map[string]float64{}
	for _, reason := range []string{"not_owner", "fenced"} {
		refusedBefore[reason] = readMetric(t, guardRefusals.WithLabelValues(g.name, "dwd-0", reason))
	}
	refused := func(reason string) float64 {
		return readMetric(t, guardRefusals.WithLabelValues(g.name, "dwd-0", reason)) - refusedBefore[reason]
	}

	// The context ends at FenceAt: the deadline is as far from the real clock's now as FenceAt is
	// from the member's (fake) clock.
	remaining := a.member.FenceAt().Sub(g.clk.Now())
	require.Positive(t, remaining)
	before := time.Now()
	ctx, cancel, err := a.coord.Guard(context.Background(), mine)
	after := time.Now()
	require.NoError(t, err)
	deadline, ok := ctx.Deadline()
	cancel()
	require.True(t, ok, "the guarded context has a deadline")
	assert.False(t, deadline.Before(before.Add(remaining)), "deadline %s before FenceAt", deadline)
	assert.False(t, deadline.After(after.Add(remaining)), "deadline %s after FenceAt", deadline)

	_, cancel, err = a.coord.Guard(context.Background(), notMine)
	cancel()
	assert.ErrorIs(t, err, ErrNotOwner)
	assert.Equal(t, 1.0, refused("not_owner"))

	// The member loop has not run (no Fence call): the clock alone passes the fence moment.
	g.clk.SetTime(a.member.FenceAt().Add(-time.Nanosecond))
	_, cancel, err = a.coord.Guard(context.Background(), mine)
	cancel()
	require.NoError(t, err, "allowed until the fence moment")
	g.clk.SetTime(a.member.FenceAt())
	require.NotEmpty(t, a.coord.Held(), "Fence has not been called")
	_, cancel, err = a.coord.Guard(context.Background(), mine)
	cancel()
	assert.ErrorIs(t, err, ErrFenced)
	assert.False(t, a.coord.Owns(mine), "a fenced member owns nothing")
	assert.Equal(t, 1.0, refused("fenced"))
}

// docs/sharding.md, "The margin is accounted for": bounded fences.

// gatedRelease blocks every Released until the test hands it a token, and counts the calls in
// flight at once.
type gatedRelease struct {
	tokens              chan struct{}
	inFlight, maxFlight atomic.Int32
}

func (h *gatedRelease) Acquired(context.Context, int, Takeover) {}

func (h *gatedRelease) Released(int) {
	n := h.inFlight.Add(1)
	for {
		m := h.maxFlight.Load()
		if n <= m || h.maxFlight.CompareAndSwap(m, n) {
			break
		}
	}
	<-h.tokens
	h.inFlight.Add(-1)
}

// readMetric reads a gauge's or a counter's value.
func readMetric(t *testing.T, m prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(m)
}

// fenceCount returns how many fences dwd_sharding_fence_duration_seconds has observed for member.
func fenceCount(t *testing.T, group, member string) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, fenceSeconds.WithLabelValues(group, member).(prometheus.Metric).Write(&m))
	return m.GetHistogram().GetSampleCount()
}

func TestFenceStopsAtMostEightPartitionsAtOnceAndRecordsItsDuration(t *testing.T) {
	const partitions = 64
	store := leasestest.NewStore()
	handler := &gatedRelease{tokens: make(chan struct{})}
	c := NewCoordinator(Config{Group: "fence-bound", Member: "m", Incarnation: "i",
		Ring: safetyRing(partitions), LeaseDuration: safetyLease, RetryPeriod: safetyRetry, WriteConcurrency: 1,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clocktesting.NewFakeClock(safetyT0), Log: logr.Discard(), Handlers: []PartitionHandler{handler}})
	_, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	require.Len(t, c.Held(), partitions)
	fences := fenceCount(t, "fence-bound", "m")

	done := make(chan struct{})
	go func() { c.Fence(); close(done) }()
	require.Eventually(t, func() bool { return handler.inFlight.Load() >= stopWorkers }, 10*time.Second, time.Millisecond,
		"the fence stops partitions in parallel")
	for range partitions {
		select {
		case handler.tokens <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatalf("a Released call never came")
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Fence did not return")
	}
	assert.Empty(t, c.Held())
	assert.Equal(t, int32(stopWorkers), handler.maxFlight.Load(), "Released calls at once")
	assert.Equal(t, fences+1, fenceCount(t, "fence-bound", "m"), "dwd_sharding_fence_duration_seconds observed the fence")
}

// blockingRelease is a handler whose Released blocks until unblock is closed; entered is closed at
// the first Released call.
type blockingRelease struct {
	entered, unblock chan struct{}
	once             sync.Once
}

func (h *blockingRelease) Acquired(context.Context, int, Takeover) {}

func (h *blockingRelease) Released(int) {
	h.once.Do(func() { close(h.entered) })
	<-h.unblock
}

func TestFenceThatOverrunsItsBudgetExits(t *testing.T) {
	settings := config.Sharding{GroupName: "fence-budget", MemberName: "m",
		MemberLeaseDuration: safetyLease, MemberRenewDeadline: safetyRenew, MemberRetryPeriod: safetyRetry}
	budget := (safetyLease - safetyRenew) / 2
	for _, tc := range []struct {
		name   string
		after  time.Duration // how long the stop takes on the fake clock
		exited bool
	}{
		{name: "within the budget", after: budget - time.Millisecond},
		{name: "past the budget", after: budget, exited: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(safetyT0)
			store := leasestest.NewStore()
			handler := &blockingRelease{entered: make(chan struct{}), unblock: make(chan struct{})}
			c := NewCoordinator(Config{Group: settings.GroupName, Member: "m", Incarnation: "i",
				Ring: safetyRing(7), LeaseDuration: safetyLease, RetryPeriod: safetyRetry, WriteConcurrency: 1,
				Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard(), Handlers: []PartitionHandler{handler}})
			_, err := c.Reconcile(context.Background())
			require.NoError(t, err)
			require.Len(t, c.Held(), 7)
			exits := make(chan int, 1)
			r := &Runner{settings: settings, log: logr.Discard(), clock: clk, coordinator: c,
				member: &leases.Member{Group: settings.GroupName, Name: "m"}, opts: RunnerOptions{Exit: func(code int) { exits <- code }}}
			overruns := readMetric(t, fenceOverruns.WithLabelValues(settings.GroupName, "m"))

			fenced := make(chan struct{})
			go func() { r.onFence(); close(fenced) }()
			waitClosed(t, handler.entered, "the fence stops the first partition")
			require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "onFence waits for its budget")
			clk.Step(tc.after)
			if tc.exited {
				select {
				case code := <-exits:
					assert.Equal(t, 1, code)
				case <-time.After(10 * time.Second):
					t.Fatalf("a fence blocked for %s did not exit the process", tc.after)
				}
			}
			close(handler.unblock)
			waitClosed(t, fenced, "onFence returns once the work stopped")
			assert.Empty(t, c.Held())
			if tc.exited {
				assert.Error(t, r.HealthCheck(nil), "unhealthy after an overrun")
				assert.Equal(t, overruns+1, readMetric(t, fenceOverruns.WithLabelValues(settings.GroupName, "m")))
				return
			}
			assert.Empty(t, exits, "a fence within the budget does not exit")
			assert.NoError(t, r.HealthCheck(nil))
		})
	}
}

// waitClosed waits for ch to be closed, at most 10 s.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
	}
}

// docs/sharding.md, "Recovering from a seed outage": recovery from an outage of every member.

func TestOutageRecoveryDefersExpiryAndResumesOwnPartitions(t *testing.T) {
	g := newSafetyGroup(t, "outage", 31)
	a := g.start("dwd-0", safetyOptions{})
	b := g.start("dwd-1", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "two members converge")
	before := g.work.heldBy()
	mark := g.work.mark()

	a.conn.cut()
	b.conn.cut()
	g.runUntil(safetyRenew+time.Second, func() bool { return len(g.work.heldBy()) == 0 }, "both fence")
	g.runFor(time.Minute)
	require.Empty(t, g.work.heldBy())
	_, unfenced := a.member.Outage()
	require.True(t, unfenced.IsZero())

	// dwd-0 reconnects first; dwd-1's lease, unchanged in the cache for over a minute, says nothing
	// about dwd-1: dwd-0 could not observe it either.
	a.conn.heal()
	g.runUntil(safetyRetry+time.Second, func() bool { return !a.member.Fenced(g.clk.Now()) }, "dwd-0 renews")
	from, unfenced := a.member.Outage()
	assert.False(t, unfenced.IsZero(), "the outage ends at the first renewal after it")
	assert.True(t, from.Before(unfenced))
	g.runFor(3 * time.Second)
	assert.Equal(t, before["dwd-0"], a.held(), "dwd-0 resumes its own partitions and takes none of dwd-1's")

	b.conn.heal()
	g.runUntil(5*time.Second, g.converged("dwd-0", "dwd-1"), "dwd-1 resumes its partitions")
	owner := map[int]string{}
	for m, ps := range before {
		for _, p := range ps {
			owner[p] = m
		}
	}
	acquired := g.work.acquiredSince(mark)
	assert.Len(t, acquired, 31, "each partition acquired once after the outage")
	for _, acq := range acquired {
		assert.Equal(t, owner[acq.partition], acq.member, "partition %d acquired by its pre-outage holder", acq.partition)
		assert.Equal(t, Resume, acq.takeover.Cause, "partition %d: re-taken by the process that held it before its fence", acq.partition)
	}
}

// docs/sharding.md, "No ghosts": orphaned member leases.

func TestGhostMemberLeaseIsDeletedAndRestartsConvergeQuickly(t *testing.T) {
	g := newSafetyGroup(t, "ghost", 61)
	// dwd-9 was killed during a scale-down: its lease stays held, and nobody renews it.
	ghost := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: g.memberLeaseName("dwd-9"),
		Labels:      map[string]string{leases.GroupLabel: g.name, leases.KindLabel: leases.KindMember},
		Annotations: map[string]string{leases.IncarnationAnnotation: "dwd-9/0", leases.SettingsAnnotation: Settings(g.ring, nil)}}}
	ghost.Spec.HolderIdentity = ptr.To("dwd-9")
	ghost.Spec.LeaseDurationSeconds = ptr.To[int32](15)
	ghost.Spec.RenewTime = ptr.To(metav1.NewMicroTime(safetyT0.Add(-time.Hour)))
	_, err := g.store.Create(context.Background(), ghost)
	require.NoError(t, err)

	members := []string{"dwd-0", "dwd-1", "dwd-2"}
	procs := map[string]*safetyProc{}
	for _, m := range members {
		procs[m] = g.start(m, safetyOptions{})
	}
	g.runUntil(safetyLease+10*time.Second, g.converged(members...), "three members converge once the ghost expired")
	deleted := func() float64 {
		sum := 0.0
		for _, m := range members {
			sum += readMetric(t, orphansDeleted.WithLabelValues(g.name, m))
		}
		return sum
	}
	deletedBefore := deleted()
	g.runUntil(leases.OrphanedAfter*safetyLease, func() bool {
		_, err := g.store.Get(context.Background(), g.memberLeaseName("dwd-9"))
		return apierrors.IsNotFound(err)
	}, "the ghost lease is deleted")
	t.Logf("ghost lease deleted %s after the start (OrphanedAfter·D = %s)", g.clk.Since(safetyT0), leases.OrphanedAfter*safetyLease)
	assert.GreaterOrEqual(t, g.clk.Since(safetyT0), leases.OrphanedAfter*safetyLease, "not before OrphanedAfter·D")
	assert.Equal(t, 1.0, deleted()-deletedBefore, "dwd_sharding_orphaned_leases_deleted_total")

	for _, restart := range []struct {
		member    string
		returning time.Duration
	}{{"dwd-1", 0}, {"dwd-2", 30 * time.Second}} {
		g.leave(procs[restart.member], restart.returning)
		procs[restart.member] = g.start(restart.member, safetyOptions{})
		took := g.runUntil(3*time.Second, g.converged(members...), "every partition at its ring owner after a restart")
		t.Logf("restart of %s (returning %s): converged after %s", restart.member, restart.returning, took)
	}
}

// A member killed during a scale-down leaves a lease that nobody renews. Once the others have its
// share, that lease names no partition; it is deleted OrphanedAfter (2) durations after it last
// changed, so a process that starts after that does not count the ghost live for a duration from
// first sight and wait on the share the ghost has in its ring (docs/sharding.md, "No ghosts").
func TestANewProcessTwoDurationsAfterADepartureSeesNoGhost(t *testing.T) {
	g := newSafetyGroup(t, "ghost-l6", 61)
	members := []string{"dwd-0", "dwd-1", "dwd-2"}
	procs := map[string]*safetyProc{}
	for _, m := range members {
		procs[m] = g.start(m, safetyOptions{})
	}
	g.runUntil(safetyLease, g.converged(members...), "three members converge")
	g.crash(procs["dwd-2"])
	killed := g.clk.Now()
	g.runUntil(safetyLease+5*time.Second, g.converged("dwd-0", "dwd-1"), "the others take the share of the killed member")
	g.runFor(killed.Add(2*safetyLease + 2*time.Second).Sub(g.clk.Now()))

	g.start("dwd-3", safetyOptions{})
	took := g.runUntil(safetyLease, g.converged("dwd-0", "dwd-1", "dwd-3"), "a new member's share at its ring owner")
	t.Logf("a member started 2·D after a kill converged after %s", took)
	assert.Less(t, took, 5*time.Second, "no ghost in the new member's ring")
}

// A restarted member whose cache still shows its predecessor's leave (away, returning) does not
// count itself away: its ring keeps its reserved share its own, and it is ready only once it holds
// it (CI's TestRollingRestartMovesNoPartition saw the new process ready before it held its share).
func TestARestartedMemberIsNotReadyOnThePartitionsKeptForItself(t *testing.T) {
	g := newSafetyGroup(t, "ready-return", 31)
	procs := map[string]*safetyProc{"dwd-0": g.start("dwd-0", safetyOptions{})}
	procs["dwd-1"] = g.start("dwd-1", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "two members converge")
	g.leave(procs["dwd-1"], 30*time.Second)

	view := &frozenLister{store: g.store}
	view.freeze() // the new process's cache shows the old one's leave until the test thaws it
	b := g.start("dwd-1", safetyOptions{lister: view})
	b.conn.setFault(func(op string, l *coordinationv1.Lease) error {
		if l.Labels[leases.KindLabel] == leases.KindPartition {
			return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
		}
		return nil
	})
	for range 5 {
		g.tick()
		require.Empty(t, b.coord.Held())
		assert.False(t, b.coord.Ready(), "not ready while its share is only kept for it")
	}
	b.conn.setFault(nil)
	view.thaw()
	g.runUntil(10*time.Second, b.coord.Ready, "ready once it holds its share")
	assert.True(t, g.converged("dwd-0", "dwd-1")())
}

// docs/sharding.md, "Handover state survives a failed release".

// onceState hands over the state of each partition once, as the weeder does: HandoverState takes it.
type onceState struct {
	mu    sync.Mutex
	taken map[int]bool
}

const safetyStateKey = leases.HandoverAnnotationPrefix + "windows"

func (h *onceState) Acquired(context.Context, int, Takeover) {}
func (h *onceState) Released(int)                            {}

func (h *onceState) HandoverState(p int) (string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taken[p] {
		return safetyStateKey, ""
	}
	h.taken[p] = true
	return safetyStateKey, fmt.Sprintf("windows of %d", p)
}

func TestFailedReleaseKeepsTheHandoverStateForTheRetry(t *testing.T) {
	g := newSafetyGroup(t, "release-state", 31)
	a := g.start("dwd-0", safetyOptions{handlers: []PartitionHandler{&onceState{taken: map[int]bool{}}}})
	g.runUntil(time.Minute, g.converged("dwd-0"), "dwd-0 holds every partition")
	var failedOnce atomic.Bool
	var failed atomic.Pointer[string]
	a.conn.setFault(func(op string, l *coordinationv1.Lease) error {
		if isReleaseWrite(op, l) && !failedOnce.Swap(true) {
			failed.Store(&l.Name)
			return apierrors.NewInternalError(errors.New("etcdserver: leader changed"))
		}
		return nil
	})
	mark := g.work.mark()

	g.start("dwd-1", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "dwd-1 gets its share")
	require.NotNil(t, failed.Load(), "a release failed")
	moved := g.work.acquiredSince(mark)
	require.Len(t, moved, len(g.ringOf("dwd-0", "dwd-1")["dwd-1"]))
	for _, acq := range moved {
		assert.Equal(t, Handover, acq.takeover.Cause, "partition %d", acq.partition)
		assert.Equal(t, fmt.Sprintf("windows of %d", acq.partition), acq.takeover.State[safetyStateKey],
			"partition %d carries its state (the first release of %s failed)", acq.partition, *failed.Load())
	}
}

// docs/sharding.md, "Recovering from a seed outage": a member whose own cache has stopped.

func TestStaleOwnViewChangesNothing(t *testing.T) {
	g := newSafetyGroup(t, "stale-view", 31)
	view := &frozenLister{store: g.store}
	a := g.start("dwd-0", safetyOptions{lister: view})
	b := g.start("dwd-1", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "two members converge")
	before := a.held()
	stale := func() float64 { return readMetric(t, viewStale.WithLabelValues(g.name, "dwd-0")) }
	require.Zero(t, stale())

	// dwd-0's watch stops while dwd-1 dies: dwd-0 cannot tell that from what its cache shows.
	view.freeze()
	g.crash(b)
	writes := a.conn.partitionWrites.Load()
	g.runFor(3 * safetyLease)
	assert.Equal(t, before, a.held(), "keeps what it holds and acquires nothing")
	assert.Equal(t, writes, a.conn.partitionWrites.Load(), "writes no partition lease")
	assert.Equal(t, 1.0, stale(), "dwd_sharding_view_stale")
	assert.False(t, a.coord.Ready())

	view.thaw()
	g.runUntil(5*time.Second, g.converged("dwd-0"), "with a fresh cache again, dwd-0 takes dwd-1's share")
	assert.Zero(t, stale())
}

// Readiness: holding the share.

func TestReadyOnlyOnceHoldingEveryPartitionTheRingGives(t *testing.T) {
	g := newSafetyGroup(t, "ready", 31)
	a := g.start("dwd-0", safetyOptions{})
	assert.False(t, a.coord.Ready(), "not ready before the first reconcile")
	g.runUntil(time.Minute, g.converged("dwd-0"), "dwd-0 holds every partition")
	assert.True(t, a.coord.Ready())

	// dwd-0's releases of three partitions fail until the test lets them through.
	share := g.ringOf("dwd-0", "dwd-1")["dwd-1"]
	require.Greater(t, len(share), 3)
	stuck := map[string]bool{}
	for _, p := range share[:3] {
		stuck[leases.PartitionLeaseName(g.name, p)] = true
	}
	a.conn.setFault(func(op string, l *coordinationv1.Lease) error {
		if isReleaseWrite(op, l) && stuck[l.Name] {
			return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
		}
		return nil
	})
	b := g.start("dwd-1", safetyOptions{})
	g.tick()
	assert.False(t, b.coord.Ready(), "not ready before holding anything")
	g.runUntil(10*time.Second, func() bool { return len(b.coord.Held()) == len(share)-3 }, "dwd-1 gets all but three partitions")
	g.runFor(5 * time.Second)
	assert.False(t, b.coord.Ready(), "not ready while three partitions of its share are held elsewhere")
	assert.True(t, a.coord.Ready(), "dwd-0 holds its own share")

	a.conn.setFault(nil)
	g.runUntil(10*time.Second, b.coord.Ready, "ready once it holds its share")
	assert.True(t, g.converged("dwd-0", "dwd-1")())
}

// A member leaving for good releases every partition and writes its clean-leave marker; the others
// take its share at once and delete its member lease. Had it deleted the lease itself right after
// the marker, a member whose cache never showed the marker would count it live for a lease duration.
func TestDepartingMemberIsTakenOverAtOnceAndItsLeaseDeleted(t *testing.T) {
	g := newSafetyGroup(t, "depart-delete", 61)
	g.start("dwd-0", safetyOptions{})
	g.start("dwd-1", safetyOptions{})
	leaving := g.start("dwd-2", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1", "dwd-2"), "three members converge")
	g.runFor(5 * time.Second)

	// Runner.shutdown of a departing member, all between two reconciles of the others.
	ctx := context.Background()
	lost, err := leaving.coord.LeaveForGood(ctx)
	require.NoError(t, err)
	g.remove(leaving)
	require.NoError(t, leaving.member.Release(ctx, g.clk.Now(), leases.Leave{StateLost: lost}))
	leaving.cancel()

	took := g.runUntil(safetyLease+5*time.Second, g.converged("dwd-0", "dwd-1"), "the others take the departed member's partitions")
	assert.LessOrEqual(t, took, 3*time.Second, "a departure hands the share over at once")
	g.runFor(safetyLease) // the marker is kept until every member has seen it or expired the member
	_, err = g.store.Get(ctx, g.memberLeaseName("dwd-2"))
	assert.True(t, apierrors.IsNotFound(err), "the others delete the member lease of a member gone for good")
}

// A held partition lease that someone deletes before this member's cache ever showed its own
// create: once the cache shows later writes of this member (it is fresh), the lease is gone, and
// the work must stop, or a member whose ring names it for the partition creates the lease anew and
// acts on it as well.
func TestHolderStopsWhenItsNewPartitionLeaseIsDeletedBeforeItsCacheShowedIt(t *testing.T) {
	g := newSafetyGroup(t, "foreign-unseen", 31)
	view := &frozenLister{store: g.store}
	a := g.start("dwd-0", safetyOptions{lister: view})
	a.renewRound(context.Background())
	require.False(t, a.member.Fenced(g.clk.Now()), "dwd-0 holds its member lease")
	view.freeze() // the cache shows no partition lease until the test thaws it
	_, err := a.coord.Reconcile(context.Background())
	require.NoError(t, err)
	require.Len(t, a.held(), 31, "dwd-0 created every partition lease")

	// A partition that will go to dwd-1 once it joins.
	p := g.ringOf("dwd-0", "dwd-1")["dwd-1"][0]
	require.NoError(t, g.store.Delete(context.Background(), leases.PartitionLeaseName(g.name, p), ""))
	view.thaw()
	g.runFor(2 * safetyRetry) // renewals the cache shows: it is fresh, and past the create
	own, err := g.store.Get(context.Background(), g.memberLeaseName("dwd-0"))
	require.NoError(t, err)
	require.False(t, a.member.ViewStale(own.ResourceVersion, g.clk.Now(), 2*safetyRetry))
	// The work stopped when the cache showed the lease gone; dwd-0, still the partition's ring owner,
	// may act on it again only by its own fresh write.
	if a.coord.Holds(p) {
		assert.Equal(t, "dwd-0", g.store.Holder(leases.PartitionLeaseName(g.name, p)), "acting on partition %d only with a lease of its own", p)
	}

	// dwd-1 joins and reconciles before dwd-0 does in each tick: it finds no lease for p and creates
	// it; the work log fails the test if dwd-0 still acts on p then.
	b := g.start("dwd-1", safetyOptions{})
	g.running = append([]*safetyProc{b}, g.running[:len(g.running)-1]...)
	g.runUntil(10*time.Second, g.converged("dwd-0", "dwd-1"), "two members converge")
}

// causeCounter counts the takeovers of each cause it is given.
type causeCounter struct {
	mu     *sync.Mutex
	causes map[TakeoverCause]int
}

func (h causeCounter) Acquired(_ context.Context, _ int, to Takeover) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.causes[to.Cause]++
}

func (causeCounter) Released(int) {}

// The receiving side of a leave (docs/sharding.md, "Graceful stops"): partitions still naming a
// member that left are taken over as a handover when its member lease says it kept their state, and
// as after a crash when it says the state was lost, so that the next holder re-opens what the work
// may have missed (the weeder's windows).
func TestPartitionsOfALeaveThatLostItsStateAreTakenOverAsAfterACrash(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("state lost: %v", lost), func(t *testing.T) {
			g := newSafetyGroup(t, fmt.Sprintf("lost-%v", lost), 31)
			counter := causeCounter{mu: &sync.Mutex{}, causes: map[TakeoverCause]int{}}
			g.start("dwd-0", safetyOptions{handlers: []PartitionHandler{counter}})
			leaving := g.start("dwd-1", safetyOptions{})
			g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "two members converge")
			g.runFor(5 * time.Second)
			share := len(leaving.held())
			require.NotZero(t, share)
			counter.mu.Lock()
			clear(counter.causes)
			counter.mu.Unlock()

			// Its work stops, and it leaves without releasing its partitions: they still name it.
			ctx := context.Background()
			leaving.coord.Fence()
			g.remove(leaving)
			require.NoError(t, leaving.member.Release(ctx, g.clk.Now(), leases.Leave{StateLost: lost}))
			leaving.cancel()
			g.runUntil(safetyLease+5*time.Second, g.converged("dwd-0"), "dwd-0 takes the share of the member that left")

			want := Handover
			if lost {
				want = Crash
			}
			counter.mu.Lock()
			defer counter.mu.Unlock()
			assert.Equal(t, map[TakeoverCause]int{want: share}, counter.causes)
		})
	}
}
