package sharding

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// InitialShare guesses, from the group's Leases as a process reads them before it starts, the
// partitions its member will hold: those whose lease names it as holder or keeps them reserved for
// it (a restart), and those the ring of the members that look live, itself included, gives it. The
// replica's caches start with that share, so that they list it while the rest of the process starts
// instead of after the member's first reconcile; the reconciles correct a wrong guess (Caches), and
// nothing is acquired on the guess. nil for an invalid ring.
func InitialShare(group, me string, ring RingConfig, list []coordinationv1.Lease, now time.Time) []bool {
	members := []string{me}
	held := make([]bool, ring.PartitionCount)
	for i := range list {
		l := &list[i]
		if m, ok := leases.MemberOf(group, l); ok && m != me && looksLive(m, l, now) {
			members = append(members, m)
		}
		if p, ok := leases.PartitionOf(group, ring.PartitionCount, l); ok && (leases.Holder(l) == me || leases.ReservedFor(l) == me) {
			held[p] = true
		}
	}
	r, err := NewRing(members, ring)
	if err != nil {
		return nil
	}
	for _, p := range r.PartitionsOf(me) {
		held[p] = true
	}
	return held
}

// looksLive reports whether a member lease of member was renewed within its advertised duration (or
// its return grace after a restart's leave) and does not say it left for good.
func looksLive(member string, l *coordinationv1.Lease, now time.Time) bool {
	a := leases.AdvertOf(member, l)
	if l.Spec.RenewTime == nil || (a.Left && a.Returning == 0) {
		return false
	}
	valid := max(a.Duration, a.Returning)
	return now.Before(l.Spec.RenewTime.Add(valid))
}
