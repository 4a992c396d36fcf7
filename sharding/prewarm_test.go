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
