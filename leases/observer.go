package leases

import (
	"sort"
	"time"
)

// Observer judges other members' leases by observation rather than by the renewTime their holders
// write with their own clocks: a member is live while its lease is held and has changed within the
// lease duration on this process's clock, counted from the moment the change was first observed.
// A member first seen now counts as live for a full duration. Clock offsets between machines then do
// not matter, only clock rates.
//
// An Observer is not safe for concurrent use; the coordinator's reconcile loop owns it.
type Observer struct {
	duration time.Duration
	seen     map[string]observation
}

// observation is what was last seen of one member's lease.
type observation struct {
	version string    // resourceVersion of the lease, "" when the lease was not found
	held    bool      // the lease names its member as holder
	since   time.Time // when version was first observed, on this process's clock
}

// NewObserver returns an Observer that expires leases unchanged for duration.
func NewObserver(duration time.Duration) *Observer {
	return &Observer{duration: duration, seen: map[string]observation{}}
}

// Observe records the state of member's lease at now: its resourceVersion and whether it is held.
// An absent lease is observed with version "" and held false; a member whose lease has vanished is
// still judged by its last observed change.
func (o *Observer) Observe(member, version string, held bool, now time.Time) {
	prev, ok := o.seen[member]
	if ok && prev.version == version && prev.held == held {
		return
	}
	if ok && version == "" {
		// The lease vanished: keep counting from its last observed change.
		prev.version, prev.held = "", held && prev.held
		o.seen[member] = prev
		return
	}
	o.seen[member] = observation{version: version, held: held, since: now}
}

// Forget drops a member, for example one whose lease has been absent for longer than the duration.
func (o *Observer) Forget(member string) {
	delete(o.seen, member)
}

// Live reports whether member's lease was held and changed within the duration before now.
func (o *Observer) Live(member string, now time.Time) bool {
	obs, ok := o.seen[member]
	return ok && obs.held && now.Sub(obs.since) < o.duration
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

// Seen returns when the last observed change of member's lease was first seen, and whether the
// lease was held then (false: the member released it).
func (o *Observer) Seen(member string) (since time.Time, held, ok bool) {
	obs, ok := o.seen[member]
	return obs.since, obs.held, ok
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
		if d := obs.since.Add(o.duration).Sub(now); !found || d < next {
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
