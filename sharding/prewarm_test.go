package sharding

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// Before a silent member's lease expires, the caches hold the partitions this member would take from
// it, so that a crash is taken over without a wait for them; nothing is acquired before the expiry.
// Only while this member's own renewals show, and only for one silent member: when every member looks
// silent, the API server is what fails.
func TestTheCachesHoldASilentMembersShareBeforeItExpires(t *testing.T) {
	for _, tc := range []struct {
		name     string
		others   []string
		ownShown bool
		// lateRenewal renews its lease 4 s in: quiet for three retry periods at the check, but not
		// due to expire within the lead (a brownout's members fall quiet one renewal apart)
		lateRenewal string
		prewarm     bool
	}{
		{name: "one member silent", others: []string{"n"}, ownShown: true, prewarm: true},
		{name: "own renewals not shown", others: []string{"n"}},
		{name: "two members silent", others: []string{"n", "o"}, ownShown: true},
		{name: "two members quiet, one renewed later", others: []string{"n", "o"}, ownShown: true, lateRenewal: "o"},
		{name: "one member silent, one renewing", others: []string{"n", "o"}, ownShown: true, lateRenewal: "o-renews"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := leasestest.NewStore()
			clk := clocktesting.NewFakeClock(time.Now())
			for _, m := range append([]string{"m"}, tc.others...) {
				_, err := store.Create(ctx, memberLease("g", m, "prober", clk.Now().Add(-time.Hour), clk.Now(), ""))
				require.NoError(t, err)
			}
			ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
			liveness := &switchLiveness{}
			caches := &gatedCaches{warm: func(int) bool { return true }}
			c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i", Ring: ring,
				LeaseDuration: 15 * time.Second, RetryPeriod: 2 * time.Second, WriteConcurrency: 4,
				Settings: Settings(ring, []string{"prober"}), Caches: caches,
				Store: store, Lister: store, Liveness: liveness, Clock: clk, Log: logr.Discard()})
			shown := clk.Now()
			liveness.renewalShown.Store(&shown)
			reconcile(t, c)
			share := slices.Clone(caches.held)
			require.Contains(t, share, false, "the others have partitions")
			held := len(c.Held())

			if tc.lateRenewal != "" {
				clk.Step(4 * time.Second)
				renew(t, store, "o", clk.Now())
				reconcile(t, c)
				clk.Step(15*time.Second - PrewarmLead + time.Second - 4*time.Second)
				if tc.lateRenewal == "o-renews" {
					renew(t, store, "o", clk.Now())
				}
			} else {
				clk.Step(15*time.Second - PrewarmLead + time.Second)
			}
			if tc.ownShown {
				shown := clk.Now()
				liveness.renewalShown.Store(&shown)
			}
			reconcile(t, c)
			if tc.prewarm {
				assert.Equal(t, []bool{true, true, true, true, true, true, true}, caches.held,
					"the caches hold the silent member's partitions too")
				assert.Equal(t, "n", c.prewarmFor)
			} else if tc.lateRenewal == "o-renews" {
				assert.Subset(t, trueAt(caches.held), trueAt(share), "the caches hold this member's share")
				assert.Equal(t, "n", c.prewarmFor, "one member silent while the other renews")
			} else {
				assert.Equal(t, share, caches.held, "the caches hold this member's share only")
				assert.Empty(t, c.prewarmFor, "no member's partitions are listed ahead")
			}
			assert.Len(t, c.Held(), held, "nothing acquired before the silent member expired")
		})
	}
}

// renew writes a renewal of member's lease at now.
func renew(t *testing.T, store *leasestest.Store, member string, now time.Time) {
	t.Helper()
	l, err := store.Get(context.Background(), leases.MemberLeaseName("g", member))
	require.NoError(t, err)
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	_, err = store.Update(context.Background(), l)
	require.NoError(t, err)
}

// trueAt returns the indexes of mask that are true.
func trueAt(mask []bool) []int {
	var at []int
	for i, b := range mask {
		if b {
			at = append(at, i)
		}
	}
	return at
}

// A member that announced its leave is prewarmed for at once, while it renews and works: the caches
// hold the partitions this member will take from it before its release, and nothing is acquired
// until then. Two members leaving at once are not (the caches would hold most of the seed).
func TestTheCachesHoldALeavingMembersShareBeforeItsRelease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leaving []string
		prewarm bool
	}{
		{name: "one member leaving", leaving: []string{"n"}, prewarm: true},
		{name: "two members leaving", leaving: []string{"n", "o"}},
		{name: "none leaving", leaving: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := leasestest.NewStore()
			clk := clocktesting.NewFakeClock(time.Now())
			for _, m := range []string{"m", "n", "o"} {
				l := memberLease("g", m, "prober", clk.Now().Add(-time.Hour), clk.Now(), "")
				l.Annotations[leases.IncarnationAnnotation] = "i-" + m
				if slices.Contains(tc.leaving, m) {
					l.Annotations[leases.LeavingAnnotation] = "i-" + m
				}
				_, err := store.Create(ctx, l)
				require.NoError(t, err)
			}
			ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
			caches := &gatedCaches{warm: func(int) bool { return true }}
			c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i", Ring: ring,
				LeaseDuration: 15 * time.Second, RetryPeriod: 2 * time.Second, WriteConcurrency: 4,
				Settings: Settings(ring, []string{"prober"}), Caches: caches,
				Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard()})
			reconcile(t, c)
			share := slices.Clone(caches.held)
			held := len(c.Held())
			clk.Step(time.Second)
			for _, m := range []string{"n", "o"} {
				renew(t, store, m, clk.Now())
			}
			reconcile(t, c)
			if !tc.prewarm {
				assert.Equal(t, share, caches.held, "the caches hold this member's share only")
				assert.Empty(t, c.prewarmFor)
				return
			}
			assert.Equal(t, "n", c.prewarmFor)
			ring2, err := NewRing([]string{"m", "o"}, ring)
			require.NoError(t, err)
			for p, owner := range ring2.Assignment() {
				if owner == "m" {
					assert.True(t, caches.held[p], "partition %d, which this member takes from n, is listed ahead", p)
				}
			}
			assert.Subset(t, trueAt(caches.held), trueAt(share))
			assert.Len(t, c.Held(), held, "nothing acquired before the leaving member released it")
		})
	}
}

// The answer to a member that fenced too often (docs/sharding.md, "Gray failures"): not known until
// its own renewal after the fence shows; then StepDown for a peer seen renewing since without
// fences, but not for one that announced its leave (it is going away: stepping down for it could
// leave nobody); Stay when every peer renewed since with fences of its own.
func TestTheAnswerToAMemberThatFencedTooOften(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		ownShown, peerRenewed   bool
		peerFences, peerLeaving bool
		want                    leases.StepDownAnswer
	}{
		{name: "own renewal since not shown", peerRenewed: true, want: leases.NotYetKnown},
		{name: "peer not seen since", ownShown: true, want: leases.NotYetKnown},
		{name: "peer steady since", ownShown: true, peerRenewed: true, want: leases.StepDown},
		{name: "peer fenced too", ownShown: true, peerRenewed: true, peerFences: true, want: leases.Stay},
		{name: "peer leaving", ownShown: true, peerRenewed: true, peerLeaving: true, want: leases.Stay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := leasestest.NewStore()
			clk := clocktesting.NewFakeClock(time.Now())
			for _, m := range []string{"m", "n"} {
				l := memberLease("g", m, "prober", clk.Now().Add(-time.Hour), clk.Now(), "")
				l.Annotations[leases.IncarnationAnnotation] = "i-" + m
				_, err := store.Create(ctx, l)
				require.NoError(t, err)
			}
			ring := RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25}
			liveness := &switchLiveness{}
			c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i", Ring: ring,
				LeaseDuration: 15 * time.Second, RetryPeriod: 2 * time.Second, WriteConcurrency: 4,
				Settings: Settings(ring, []string{"prober"}), Caches: &gatedCaches{warm: func(int) bool { return true }},
				Store: store, Lister: store, Liveness: liveness, Clock: clk, Log: logr.Discard()})
			shown := clk.Now()
			liveness.renewalShown.Store(&shown)
			reconcile(t, c)
			fencedAt := clk.Now().Add(time.Second)
			clk.Step(3 * time.Second)
			if tc.peerRenewed {
				l, err := store.Get(ctx, leases.MemberLeaseName("g", "n"))
				require.NoError(t, err)
				l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clk.Now()))
				if tc.peerFences {
					l.Annotations[leases.RecentFencesAnnotation] = "1"
				}
				if tc.peerLeaving {
					l.Annotations[leases.LeavingAnnotation] = "i-n"
				}
				_, err = store.Update(ctx, l)
				require.NoError(t, err)
			}
			if tc.ownShown {
				shown := clk.Now()
				liveness.renewalShown.Store(&shown)
			}
			reconcile(t, c)
			assert.Equal(t, tc.want, c.MayStepDown(fencedAt))
		})
	}
}

// aheadCalls is a handler of timed work that records what it was told to run ahead (AheadHandler).
type aheadCalls struct {
	calls []aheadCall
}

type aheadCall struct {
	partitions []int
	stop       time.Time
	window     time.Duration
}

func (*aheadCalls) Acquired(context.Context, int, Takeover) {}
func (*aheadCalls) Released(int)                            {}
func (a *aheadCalls) RunAhead(partitions []int, stop time.Time, window time.Duration) {
	a.calls = append(a.calls, aheadCall{slices.Clone(partitions), stop, window})
}

// A member that will hand partitions to another once a leaving member has left (the ring without the
// leaver moves some between those that stay) runs their work due right after the leave ahead of it,
// as the leaver does its own, when it first sees the announcement, and only then.
func TestAMemberRunsAheadWhatItHandsOnWhenAnotherLeaves(t *testing.T) {
	ctx := context.Background()
	store := leasestest.NewStore()
	clk := clocktesting.NewFakeClock(time.Now())
	ring := RingConfig{PartitionCount: 64, ReplicationFactor: 10, LoadBound: 1.25} // moves one of m's to o
	for _, m := range []string{"m", "n", "o"} {
		l := memberLease("g", m, "prober", clk.Now().Add(-time.Hour), clk.Now(), "")
		l.Annotations[leases.IncarnationAnnotation] = "i-" + m
		l.Annotations[leases.SettingsAnnotation] = Settings(ring, []string{"prober"})
		_, err := store.Create(ctx, l)
		require.NoError(t, err)
	}
	ahead := &aheadCalls{}
	c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i", Ring: ring,
		LeaseDuration: 15 * time.Second, RetryPeriod: 2 * time.Second, WriteConcurrency: 4,
		Settings: Settings(ring, []string{"prober"}), Caches: &gatedCaches{warm: func(int) bool { return true }},
		Handlers: []PartitionHandler{ahead}, Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard()})
	reconcile(t, c)
	require.NotEmpty(t, c.Held())
	assert.Empty(t, ahead.calls, "nobody leaves")

	clk.Step(time.Second)
	renew(t, store, "o", clk.Now())
	l, err := store.Get(ctx, leases.MemberLeaseName("g", "n"))
	require.NoError(t, err)
	l.Annotations[leases.LeavingAnnotation] = "i-n"
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clk.Now()))
	_, err = store.Update(ctx, l)
	require.NoError(t, err)
	reconcile(t, c)
	without, err := NewRing([]string{"m", "o"}, ring)
	require.NoError(t, err)
	var handing []int
	for p, owner := range without.Assignment() {
		if owner == "o" && c.Holds(p) {
			handing = append(handing, p)
		}
	}
	require.NotEmpty(t, handing, "the ring without n moves some of m's partitions to o")
	require.Len(t, ahead.calls, 1)
	assert.ElementsMatch(t, handing, ahead.calls[0].partitions)
	assert.Equal(t, clk.Now().Add(LeaveLead), ahead.calls[0].stop)
	assert.Equal(t, RunAheadWindow, ahead.calls[0].window)

	clk.Step(time.Second)
	for _, m := range []string{"n", "o"} {
		renew(t, store, m, clk.Now())
	}
	reconcile(t, c)
	assert.Len(t, ahead.calls, 1, "told once per announcement")
}
