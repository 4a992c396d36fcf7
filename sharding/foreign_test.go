package sharding

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// foreignList is a Lister of other groups' member leases that a test edits.
type foreignList struct {
	mu     sync.Mutex
	leases []*coordinationv1.Lease
}

func (f *foreignList) List() []*coordinationv1.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leases
}

func (f *foreignList) set(ls ...*coordinationv1.Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = ls
}

// memberLease is the member lease of member in group, held, renewed at renewed, created at created,
// advertising roles, at resourceVersion rv.
func memberLease(group, member, roles string, created, renewed time.Time, rv string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: leases.MemberLeaseName(group, member), ResourceVersion: rv, CreationTimestamp: metav1.NewTime(created),
			Labels:      map[string]string{leases.GroupLabel: group, leases.KindLabel: leases.KindMember},
			Annotations: map[string]string{leases.SettingsAnnotation: Settings(RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}, []string{roles})},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(member), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	}
}

// foreignCoordinator is a coordinator of member m in group g, running the prober, that watches the
// other groups' member leases in foreign.
func foreignCoordinator(t *testing.T, store *leasestest.Store, foreign Lister, clk *clocktesting.FakeClock) *Coordinator {
	t.Helper()
	return foreignCoordinatorWithEvents(t, store, foreign, clk, nil)
}

// foreignCoordinatorWithEvents is foreignCoordinator whose Events go to event.
func foreignCoordinatorWithEvents(t *testing.T, store *leasestest.Store, foreign Lister, clk *clocktesting.FakeClock,
	event func(eventType, reason, action, message string)) *Coordinator {
	t.Helper()
	ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
	return NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i", Ring: ring,
		LeaseDuration: 15 * time.Second, RetryPeriod: 2 * time.Second, WriteConcurrency: 4,
		Settings: Settings(ring, []string{"prober"}), Foreign: foreign, Event: event,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard()})
}

func reconcile(t *testing.T, c *Coordinator) {
	t.Helper()
	_, err := c.Reconcile(context.Background())
	require.NoError(t, err)
}

func TestAMemberDefersToALiveSeniorMemberOfAnotherGroup(t *testing.T) {
	t0 := time.Now()
	clk := clocktesting.NewFakeClock(t0)
	store := leasestest.NewStore()
	foreign := &foreignList{}
	var events []string
	c := foreignCoordinatorWithEvents(t, store, foreign, clk, func(eventType, reason, action, _ string) {
		events = append(events, eventType+"/"+reason+"/"+action)
	})
	reconcile(t, c)
	require.Len(t, c.Held(), 7, "alone in the namespace")
	require.True(t, c.Ready())
	assert.Empty(t, events)

	// A member of another group that runs the prober, there before this one (whose member lease the
	// store does not hold: junior to any).
	foreign.set(memberLease("other", "x", "prober", t0.Add(-time.Hour), t0, "1"))
	reconcile(t, c)
	assert.Empty(t, c.Held(), "every partition released while the incumbent is live")
	assert.False(t, c.Ready())
	assert.Equal(t, []string{corev1.EventTypeWarning + "/ForeignGroupActive/" + ActionRebalance}, events, "one Event when the deferring begins")
	for p := range 7 {
		l, err := store.Get(context.Background(), leases.PartitionLeaseName("g", p))
		require.NoError(t, err)
		assert.Empty(t, leases.Holder(l), "partition %d released", p)
	}

	clk.Step(10 * time.Second)
	foreign.set(memberLease("other", "x", "prober", t0.Add(-time.Hour), clk.Now(), "2")) // it renews
	reconcile(t, c)
	assert.Empty(t, c.Held(), "nothing acquired while it renews")

	clk.Step(14 * time.Second)
	reconcile(t, c)
	assert.Empty(t, c.Held(), "unchanged for less than its duration: still live")
	clk.Step(2 * time.Second)
	reconcile(t, c)
	assert.Len(t, c.Held(), 7, "unchanged for its duration: gone, and the share is taken again")
	assert.Equal(t, []string{corev1.EventTypeWarning + "/ForeignGroupActive/" + ActionRebalance,
		corev1.EventTypeNormal + "/ForeignGroupGone/" + ActionRebalance}, events, "one Event at each end, none while it lasts")
}

// While it defers, a member reconciles when the incumbent would expire: the incumbent's renewals
// start no reconcile, and the retry period's would take its share back up to a period late.
func TestADeferringMemberReconcilesWhenTheIncumbentWouldExpire(t *testing.T) {
	t0 := time.Now()
	clk := clocktesting.NewFakeClock(t0)
	foreign := &foreignList{}
	c := foreignCoordinator(t, leasestest.NewStore(), foreign, clk)
	foreign.set(memberLease("other", "x", "prober", t0.Add(-time.Hour), t0, "1"))
	after, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	require.Empty(t, c.Held())
	assert.Equal(t, 2*time.Second, after, "a retry period while the incumbent's expiry is further")
	clk.Step(15*time.Second - 500*time.Millisecond)
	after, err = c.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, after, "then at its expiry")
	clk.Step(after)
	reconcile(t, c)
	assert.Len(t, c.Held(), 7, "its share taken at once")
}

func TestWhichMembersOfAnotherGroupAMemberDefersTo(t *testing.T) {
	t0 := time.Now()
	own := memberLease("g", "m", "prober", t0.Add(-time.Hour), t0, "")
	leftForGood := memberLease("other", "x", "prober", t0.Add(-2*time.Hour), t0, "1")
	leftForGood.Annotations[leases.LeftAnnotation], leftForGood.Annotations[leases.IncarnationAnnotation] = "inc", "inc"
	returning := memberLease("other", "x", "prober", t0.Add(-2*time.Hour), t0, "1")
	returning.Annotations[leases.LeftAnnotation], returning.Annotations[leases.IncarnationAnnotation] = "inc", "inc"
	returning.Annotations[leases.ReturningAnnotation] = "1m"
	unheld := memberLease("other", "x", "prober", t0.Add(-2*time.Hour), t0, "1")
	unheld.Spec.HolderIdentity = nil
	noSettings := memberLease("other", "x", "prober", t0.Add(-2*time.Hour), t0, "1")
	delete(noSettings.Annotations, leases.SettingsAnnotation)
	shadow := memberLease("other", "x", "prober", t0.Add(-2*time.Hour), t0, "1")
	shadow.Annotations[leases.SettingsAnnotation] = WithDryRun(shadow.Annotations[leases.SettingsAnnotation])
	tests := []struct {
		name    string
		foreign *coordinationv1.Lease
		defers  bool
	}{
		{"a senior member with the same role", memberLease("other", "x", "prober", t0.Add(-2*time.Hour), t0, "1"), true},
		{"a senior member with both roles", memberLease("other", "x", "prober+weeder", t0.Add(-2*time.Hour), t0, "1"), true},
		{"a senior member of another role", memberLease("other", "x", "weeder", t0.Add(-2*time.Hour), t0, "1"), false},
		{"a senior member advertising no settings: any role", noSettings, true},
		{"a junior member", memberLease("other", "x", "prober", t0.Add(-time.Minute), t0, "1"), false},
		{"a member created at the same moment, named before", memberLease("a", "x", "prober", t0.Add(-time.Hour), t0, "1"), true},
		{"a member created at the same moment, named after", memberLease("z", "x", "prober", t0.Add(-time.Hour), t0, "1"), false},
		{"a senior member renewed last long ago", memberLease("other", "x", "prober", t0.Add(-2*time.Hour), t0.Add(-time.Hour), "1"), false},
		{"a senior member that left for good", leftForGood, false},
		{"a senior member restarting", returning, true},
		{"a senior member lease without a holder", unheld, false},
		{"a senior member in dry run, which acts on nothing", shadow, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := leasestest.NewStore()
			_, err := store.Create(context.Background(), own)
			require.NoError(t, err)
			foreign := &foreignList{}
			foreign.set(tt.foreign)
			c := foreignCoordinator(t, store, foreign, clocktesting.NewFakeClock(t0))
			reconcile(t, c)
			if tt.defers {
				assert.Empty(t, c.Held())
				assert.False(t, c.Ready())
			} else {
				assert.Len(t, c.Held(), 7)
			}
		})
	}
}

// A member in dry run acts on no shoot, so it defers to no one: neither a senior member of another
// group with its role nor a leader of the original's mode.
func TestAMemberInDryRunDefersToNoOne(t *testing.T) {
	t0 := time.Now()
	store := leasestest.NewStore()
	_, err := store.Create(context.Background(), memberLease("g", "m", "prober", t0.Add(-time.Hour), t0, ""))
	require.NoError(t, err)
	foreign, leaders := &foreignList{}, &foreignList{}
	foreign.set(memberLease("other", "x", "prober", t0.Add(-2*time.Hour), t0, "1"))
	leaders.set(leaderLease("original-6d4f", t0, "1"))
	c := foreignCoordinator(t, store, foreign, clocktesting.NewFakeClock(t0))
	c.cfg.Leaders = leaders
	c.cfg.Settings = WithDryRun(c.cfg.Settings)
	reconcile(t, c)
	assert.Len(t, c.Held(), 7)
	assert.True(t, c.Ready())
	assert.Empty(t, c.DeferringTo())
}

// leaderLease is a leader lease of the original's mode in garden, held by holder ("" for none) and
// renewed at renewed, at resourceVersion rv.
func leaderLease(holder string, renewed time.Time, rv string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "dwd-prober-leader-election", Namespace: "garden", ResourceVersion: rv},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// The original's mode cannot defer: a member holds nothing while the leader lease of its role is held
// and renewed, however much older its own member lease is, and takes its share once the leader has
// released it or stopped renewing it for its duration.
func TestAMemberDefersToALeaderOfTheOriginalsMode(t *testing.T) {
	t0 := time.Now()
	clk := clocktesting.NewFakeClock(t0)
	store := leasestest.NewStore()
	_, err := store.Create(context.Background(), memberLease("g", "m", "prober", t0.Add(-24*time.Hour), t0, ""))
	require.NoError(t, err)
	leaders := &foreignList{}
	c := foreignCoordinator(t, store, nil, clk)
	c.cfg.Leaders = leaders
	reconcile(t, c)
	require.Len(t, c.Held(), 7, "no leader")

	leaders.set(leaderLease("original-6d4f", t0, "1"))
	reconcile(t, c)
	assert.Empty(t, c.Held(), "every partition released while the leader is live")
	assert.False(t, c.Ready())
	assert.Equal(t, "garden/dwd-prober-leader-election", c.DeferringTo())

	clk.Step(10 * time.Second)
	leaders.set(leaderLease("original-6d4f", clk.Now(), "2"))
	reconcile(t, c)
	clk.Step(14 * time.Second)
	reconcile(t, c)
	assert.Empty(t, c.Held(), "unchanged for less than its duration: still live")
	clk.Step(2 * time.Second)
	reconcile(t, c)
	assert.Len(t, c.Held(), 7, "unchanged for its duration: gone")

	leaders.set(leaderLease("dwd-0_1b2c", clk.Now(), "3"))
	reconcile(t, c)
	assert.Empty(t, c.Held(), "a new leader")
	leaders.set(leaderLease("", clk.Now(), "4"))
	reconcile(t, c)
	assert.Len(t, c.Held(), 7, "released by the leader: gone at once")
}

// A shadow advertises its roles so that no member, of this version or of one that knows no dry run,
// finds a role of its own there: an older acting group does not defer to a senior shadow either.
func TestAShadowsRolesOverlapNoActingMembers(t *testing.T) {
	ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
	shadow := memberSettings(ring, config.Sharding{Roles: []string{"prober", "weeder"}, DryRun: true})
	assert.Equal(t, []string{"dry-run.prober", "dry-run.weeder"}, rolesOf(shadow))
	assert.False(t, overlap([]string{"prober"}, rolesOf(shadow)), "the role check of a dwd without the dry-run field")
	assert.True(t, dryRun(shadow))
	assert.False(t, dryRun(memberSettings(ring, config.Sharding{Roles: []string{"prober"}})))
}
