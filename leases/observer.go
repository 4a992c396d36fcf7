package leases

import (
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Observer judges other members' leases by observation rather than by the renewTime their holders
// write with their own clocks: a member is live while its lease has changed within its lease duration
// on this process's clock, counted from the moment the change was first observed. The duration is
// the longer of this member's own and the one the lease advertises. A member first seen now counts as
// live for a full duration. Clock offsets between machines then do not matter, only clock rates.
//
// Only the lease's own clean-leave marker ends a member at once (a returning member stays for the
// grace it advertises); a lease whose holder was changed by someone else counts as a change, not as
// a leave, so that its member has the time to notice and fence.
//
// An Observer is not safe for concurrent use; the coordinator's reconcile loop owns it.
type Observer struct {
	duration time.Duration
	seen     map[string]observation
}

// observation is what was last seen of one member's lease.
type observation struct {
	version string    // resourceVersion of the lease, "" when the lease was not found
	advert  Advert    // what the lease said when last present
	since   time.Time // when version was first observed, on this process's clock
	absent  time.Time // when the lease was first observed absent; zero while it is present
}

// OrphanedAfter is how many of its durations a member lease must stay unchanged before it counts as
// orphaned and may be deleted (once no partition lease names its member). Two: its member fenced
// itself a renew deadline after its last renewal and the others took its share a duration after, so
// by then the lease only stands for a ghost that a process starting later would count live for a
// duration from first sight, waiting on the share the ghost has in its ring (docs/sharding.md,
// "No ghosts"). The delete carries the observed resourceVersion, so a member that renews meanwhile
// keeps its lease.
const OrphanedAfter = 2

// NewObserver returns an Observer whose own lease duration is duration.
func NewObserver(duration time.Duration) *Observer {
	return &Observer{duration: duration, seen: map[string]observation{}}
}

// Observe records member's lease at now. A lease seen with a new resourceVersion counts as a change.
func (o *Observer) Observe(member string, lease *coordinationv1.Lease, now time.Time) {
	prev, ok := o.seen[member]
	if ok && prev.version == lease.ResourceVersion {
		return
	}
	o.seen[member] = observation{version: lease.ResourceVersion, advert: AdvertOf(member, lease), since: now}
}

// ObserveAbsent records that member has no lease at now. A member whose lease has vanished is still
// judged by its last observed change; one never seen (a holder named by a partition lease) counts as
// live for a full duration from now.
func (o *Observer) ObserveAbsent(member string, now time.Time) {
	prev, ok := o.seen[member]
	if !ok {
		o.seen[member] = observation{since: now, absent: now}
		return
	}
	if prev.absent.IsZero() {
		prev.absent = now
	}
	prev.version = ""
	o.seen[member] = prev
}

// AbsentFor returns how long member's lease has been observed absent at now; zero when it is present
// or unknown. A lease deleted by someone proves nothing about its member until its absence has lasted
// a lease duration: the member may act until its next renewal finds the lease gone.
func (o *Observer) AbsentFor(member string, now time.Time) time.Duration {
	obs, ok := o.seen[member]
	if !ok || obs.absent.IsZero() {
		return 0
	}
	return now.Sub(obs.absent)
}

// Defer moves the last observed change of every member that was live at from to at least to, for a
// member that could not observe anyone between from and to: the others' silence then proves nothing.
// Members already expired at from stay expired. It only ever delays expiry.
func (o *Observer) Defer(from, to time.Time) {
	for member, obs := range o.seen {
		if o.Live(member, from) && obs.since.Before(to) {
			obs.since = to
			o.seen[member] = obs
		}
	}
}

// Forget drops a member, for example one whose lease has been deleted.
func (o *Observer) Forget(member string) {
	delete(o.seen, member)
}

// expiry is how long after its last observed change a member stops being live: never live after a
// clean leave, the advertised grace for a returning member, else the longer lease duration.
func (o *Observer) expiry(obs observation) time.Duration {
	switch {
	case obs.advert.Left && obs.advert.Returning > 0:
		return obs.advert.Returning
	case obs.advert.Left:
		return 0
	}
	return max(o.duration, obs.advert.Duration)
}

// Live reports whether member is live at now.
func (o *Observer) Live(member string, now time.Time) bool {
	obs, ok := o.seen[member]
	return ok && now.Sub(obs.since) < o.expiry(obs)
}

// Orphaned reports whether member's lease may be deleted: it left for good at least a lease duration
// ago, or it has been unchanged for OrphanedAfter times its duration (or grace), on this process's
// clock. A clean leave is kept for a lease duration so that every member sees the marker, or has
// expired the member by then: a member that saw the lease vanish without ever seeing the marker
// would count it live for a lease duration from its last renewal.
func (o *Observer) Orphaned(member string, now time.Time) bool {
	obs, ok := o.seen[member]
	if !ok || obs.version == "" || o.Live(member, now) {
		return false
	}
	d := max(o.duration, obs.advert.Duration)
	if obs.advert.Left && obs.advert.Returning == 0 {
		return now.Sub(obs.since) >= d
	}
	return now.Sub(obs.since) >= OrphanedAfter*max(d, obs.advert.Returning)
}

// Unchanged reports whether member's lease still has the version observed at least one full duration
// ago, which a fresh read must confirm before another member's partitions are taken.
func (o *Observer) Unchanged(member, version string) bool {
	obs, ok := o.seen[member]
	return ok && obs.version == version
}

// Version returns the last observed resourceVersion of member's lease.
func (o *Observer) Version(member string) string {
	return o.seen[member].version
}

// Seen returns when the last observed change of member's lease was first seen and what the lease
// advertised then.
func (o *Observer) Seen(member string) (since time.Time, advert Advert, ok bool) {
	obs, ok := o.seen[member]
	return obs.since, obs.advert, ok
}

// ExpiresIn returns how long after now member stops being live if its lease does not change, and
// false when it is not live.
func (o *Observer) ExpiresIn(member string, now time.Time) (time.Duration, bool) {
	obs, ok := o.seen[member]
	if !ok || !o.Live(member, now) {
		return 0, false
	}
	return obs.since.Add(o.expiry(obs)).Sub(now), true
}

// LiveMembers returns the live members at now, sorted.
func (o *Observer) LiveMembers(now time.Time) []string {
	var live []string
	for member := range o.seen {
		if o.Live(member, now) {
			live = append(live, member)
		}
	}
	sort.Strings(live)
	return live
}

// NextExpiry returns how long after now the next live member expires if its lease does not change,
// and false when no member is live.
func (o *Observer) NextExpiry(now time.Time) (time.Duration, bool) {
	var next time.Duration
	found := false
	for member, obs := range o.seen {
		if !o.Live(member, now) {
			continue
		}
		if d := obs.since.Add(o.expiry(obs)).Sub(now); !found || d < next {
			next, found = d, true
		}
	}
	return next, found
}

// Members returns every member the Observer knows, live or not.
func (o *Observer) Members() []string {
	members := make([]string, 0, len(o.seen))
	for member := range o.seen {
		members = append(members, member)
	}
	sort.Strings(members)
	return members
}
