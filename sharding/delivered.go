package sharding

import (
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// Every member renews its lease every retry period, and every renewal reaches every replica (twice
// over for a process of both roles, whose groups watch each other's member leases): a reconcile on
// each would walk every partition N times a period for nothing, since a renewal changes no ring. So a
// steady renewal starts no reconcile (startsReconcile); the caches' Runner records when it arrived
// (deliveries), and the reconciles, which come at least every retry period, at the next moment a
// member can expire, at the next it can go silent for the prewarm (Coordinator.requeueAfter) and,
// while this member defers, at the next an incumbent can expire (deferToIncumbents), judge the member
// from that moment, as if they had run then.

// deliveries are the moments this process's Lease caches delivered the versions of the Leases they
// hold, by namespace/name. Safe for concurrent use.
type deliveries struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	at    map[string]delivery
}

type delivery struct {
	resourceVersion string
	at              time.Time
}

func newDeliveries(clk clock.PassiveClock) *deliveries {
	return &deliveries{clock: clk, at: map[string]delivery{}}
}

// record notes a cache event: the version of after arrived now; a Lease deleted (after nil) is
// forgotten. It returns how long ago the version before arrived, the longest duration when no
// arrival of it was noted.
func (d *deliveries) record(before, after *coordinationv1.Lease) time.Duration {
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	gap := time.Duration(math.MaxInt64)
	if before != nil {
		if got, ok := d.at[sightingKey(before)]; ok && got.resourceVersion == before.ResourceVersion {
			gap = now.Sub(got.at)
		}
	}
	switch {
	case after != nil && before != nil && after.ResourceVersion == before.ResourceVersion && gap != math.MaxInt64:
		// A relist's update of an unchanged version: it arrived when it first did.
	case after != nil:
		d.at[sightingKey(after)] = delivery{resourceVersion: after.ResourceVersion, at: now}
	case before != nil:
		delete(d.at, sightingKey(before))
	}
	return gap
}

// starts records a cache event and reports whether it starts a reconcile (startsReconcile), for a
// member whose lease is named own and is settled as settled says, at steadyWithin.
func (d *deliveries) starts(before, after *coordinationv1.Lease, steadyWithin time.Duration, own string, settled func() bool) bool {
	return startsReconcile(before, after, d.record(before, after), steadyWithin, own, settled)
}

// seenAt returns when the caches delivered l's version; now when they have not said so yet (a cache
// shows an object before its event handlers run).
func (d *deliveries) seenAt(l *coordinationv1.Lease, now time.Time) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if got, ok := d.at[sightingKey(l)]; ok && got.resourceVersion == l.ResourceVersion {
		return got.at
	}
	return now
}

// startsReconcile reports whether a Lease event of the caches (before nil for an add, after nil for a
// delete) starts a reconcile: every event but a steady renewal of a member or leader lease, and this
// member's own renewals (its lease is named own) unless settled says its last reconcile left it ready
// and holding partitions and none is running: after a fence or with a stale view, the renewal may be
// what it waits for. A steady renewal changes nothing but the renewal time (leases.OnlyRenewed) and
// comes less than steadyWithin after the version before it arrived (gap): a lease that renews again
// after a silence, or that a watch shows again after a stall, may have been judged expired by then,
// and the reconcile must see it live again at once (another group or the original's leader acting
// again). A partition lease's every change starts one.
func startsReconcile(before, after *coordinationv1.Lease, gap, steadyWithin time.Duration, own string, settled func() bool) bool {
	if !leases.OnlyRenewed(before, after) || after.Labels[leases.KindLabel] == leases.KindPartition || gap >= steadyWithin ||
		!renewedWithin(before, after, steadyWithin) {
		return true
	}
	return after.Name == own && !settled()
}

// renewedWithin reports whether after's renewal time is less than d after before's, both by the
// writer's clock: a lease first seen long after its last renewal counts as expired at once
// (firstChange), so its next renewal is not a steady one however soon it arrives.
func renewedWithin(before, after *coordinationv1.Lease, d time.Duration) bool {
	if before.Spec.RenewTime == nil || after.Spec.RenewTime == nil {
		return false
	}
	return after.Spec.RenewTime.Sub(before.Spec.RenewTime.Time) < d
}

// steadyRenewals is the most time between two arrivals of a lease for the second to count as a
// steady renewal, as a fraction of this member's lease duration: no lease counts as expired before
// it stayed unchanged for that duration (the observers take the longer of it and the advertised
// one), so one renewed within half of it was live all along.
const steadyRenewals = 2

// leaseOf returns the Lease of a cache event's object, also of a deletion the cache learned of only
// by a relist; nil for anything else.
func leaseOf(obj any) *coordinationv1.Lease {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	l, _ := obj.(*coordinationv1.Lease)
	return l
}
