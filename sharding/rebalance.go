package sharding

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Actions of the Events about a member (events.k8s.io/v1 requires one).
const (
	ActionFence     = "Fence"
	ActionTakeOver  = "TakeOver"
	ActionRebalance = "Rebalance"
	ActionRenew     = "Renew"
	ActionStepDown  = "StepDown"
)

// rebalance tallies one change of what this member holds, from the reconcile that first saw the live
// member set or the held partitions change to the one that leaves the member holding its share
// again, so that the change is logged once (and a takeover after a crash reported once), however
// many reconciles it takes. Reconcile steps own began and heldBefore; the counts are also added to
// by the acquires and releases a step runs at once, under mu.
type rebalance struct {
	mu sync.Mutex
	rebalanceTally
}

// rebalanceTally is what a change under way has done so far.
type rebalanceTally struct {
	open       bool      // a change is under way
	began      time.Time // when the first reconcile of the change began
	heldBefore int       // partitions held when the change began
	membersSet bool      // the live member set changed
	acquired   int
	handedOver int            // of acquired: released to this member, or left by a member that left gracefully
	resumed    int            // of acquired: re-taken by this process after a fence
	unwritten  int            // of resumed: without a partition lease write (Coordinator.resumption)
	crashed    map[string]int // of acquired: taken over from a holder whose lease expired, by holder
	released   int
	lost       int // stopped because someone else wrote their leases
}

// begin marks the change under way as of now, when the member held heldBefore partitions.
func (r *rebalance) begin(now time.Time, heldBefore int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.open {
		r.open, r.began, r.heldBefore = true, now, heldBefore
	}
}

// membersChanged records a change of the live member set.
func (r *rebalance) membersChanged() {
	r.mu.Lock()
	r.membersSet = true
	r.mu.Unlock()
}

// acquiredOne records a partition whose work started here, and how it came: crashed names the holder
// whose member lease expired, if it came from one.
func (r *rebalance) acquiredOne(cause TakeoverCause, crashed string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquired++
	switch {
	case cause == Handover:
		r.handedOver++
	case cause == Resume:
		r.resumed++
	case crashed != "":
		if r.crashed == nil {
			r.crashed = map[string]int{}
		}
		r.crashed[crashed]++
	}
}

// resumedWithoutWrite records that the last resume counted sent no partition lease write.
func (r *rebalance) resumedWithoutWrite() {
	r.mu.Lock()
	r.unwritten++
	r.mu.Unlock()
}

func (r *rebalance) releasedOne() {
	r.mu.Lock()
	r.released++
	r.mu.Unlock()
}

func (r *rebalance) lostSome(n int) {
	r.mu.Lock()
	r.lost += n
	r.mu.Unlock()
}

// rebalanceSummary is what one change of the held partitions did.
type rebalanceSummary struct {
	took                                      time.Duration
	heldBefore, acquired, handedOver, resumed int
	resumedWithoutWrite, released, lost       int
	membersChanged                            bool
	crashed                                   map[string]int
}

// takenOver is how many partitions came from holders whose leases expired.
func (s rebalanceSummary) takenOver() int {
	n := 0
	for _, c := range s.crashed {
		n += c
	}
	return n
}

// end closes the change under way, if any, and returns what it did; settled reports whether the
// reconcile that ends at now left the member holding its share with nothing left to retry.
func (r *rebalance) end(now time.Time, settled bool) (rebalanceSummary, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.open || !settled {
		return rebalanceSummary{}, false
	}
	s := rebalanceSummary{took: now.Sub(r.began), heldBefore: r.heldBefore, acquired: r.acquired, handedOver: r.handedOver,
		resumed: r.resumed, resumedWithoutWrite: r.unwritten, released: r.released, lost: r.lost, membersChanged: r.membersSet, crashed: r.crashed}
	r.rebalanceTally = rebalanceTally{}
	return s, true
}

// beginIfTouched begins the change (see begin) when anything was counted since the last end.
func (r *rebalance) beginIfTouched(now time.Time, heldBefore int) {
	r.mu.Lock()
	touched := r.acquired+r.released+r.lost > 0 || r.membersSet
	r.mu.Unlock()
	if touched {
		r.begin(now, heldBefore)
	}
}

// finishRebalance ends a reconcile step that began at began, holding heldBefore partitions: it logs
// the one summary line of a change of the held partitions once the change has settled, and records
// one Event when partitions were taken over from crashed members.
func (c *Coordinator) finishRebalance(ring *Ring, began time.Time, heldBefore int, settled bool) {
	c.rebalance.beginIfTouched(began, heldBefore)
	now := c.clock.Now()
	s, ok := c.rebalance.end(now, settled)
	if !ok {
		return
	}
	kv := []any{"group", c.cfg.Group, "members", ring.Members(), "membersChanged", s.membersChanged,
		"heldBefore", s.heldBefore, "heldAfter", len(c.Held()), "acquired", s.acquired, "takenOver", s.takenOver(),
		"handedOver", s.handedOver, "resumed", s.resumed, "released", s.released}
	if s.resumedWithoutWrite > 0 {
		kv = append(kv, "resumedWithoutWrite", s.resumedWithoutWrite)
	}
	if s.lost > 0 {
		kv = append(kv, "lost", s.lost)
	}
	if len(s.crashed) > 0 {
		kv = append(kv, "crashed", crashedMembers(s.crashed))
	}
	if owned, known := c.ownedShoots(); known {
		kv = append(kv, "shootsOwned", owned)
	}
	c.log.Info("Rebalanced", append(kv, "took", s.took.String())...)
	if n := s.takenOver(); n > 0 {
		c.event(corev1.EventTypeWarning, "TookOverAfterCrash", ActionTakeOver, fmt.Sprintf(
			"Took over %d partitions whose holders' member leases expired without a graceful leave: %s",
			n, c.describeCrashed(s.crashed)))
	}
}

// crashedMembers lists the members partitions were taken over from, sorted.
func crashedMembers(crashed map[string]int) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for m := range crashed {
			if !yield(m) {
				return
			}
		}
	})
}

// describeCrashed says, per crashed member, how many partitions were taken over from it.
func (c *Coordinator) describeCrashed(crashed map[string]int) string {
	var out []string
	for _, m := range crashedMembers(crashed) {
		name := m
		if m == c.cfg.Member {
			name += " (an earlier process of this member)"
		}
		out = append(out, fmt.Sprintf("%s (%d)", name, crashed[m]))
	}
	return strings.Join(out, ", ")
}

// ownedShoots returns the shoots this member owns as the step counted them for the shoots-owned gauge
// when the held partitions changed; unknown without a list of the shoot namespaces.
func (c *Coordinator) ownedShoots() (int, bool) {
	if c.namespaces == nil {
		return 0, false
	}
	return c.counted.owned, true
}
