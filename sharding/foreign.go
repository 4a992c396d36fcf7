package sharding

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// Ownership is exclusive inside a group only: the members of two groups in one shard namespace never
// see each other's partitions, so a process of one group acting beside a live member of another that
// runs an overlapping role would put two actors on every shoot (docs/sharding.md,
// "No second group on a role's shoots"). A group's members therefore watch the member leases of the
// other groups in the shard namespace and defer to the incumbents: while a live member of another
// group with a role of theirs holds a member lease created before their own, they hold no partition
// and are unready. Between two groups that both watch, exactly one side defers; a group that does not
// watch (an older dwd) is deferred to by every member that does. A member that defers still counts as
// live for the others: with groups of one role each (cmd/dwd runs a process of both roles as a member
// of two groups), a member that defers is only ever deferred to by members of its own role, which the
// incumbent covers.

// The original's mode is another actor the same way: a leader-elected process (the original, or dwd
// prober|weeder --enable-leader-election) acts on every shoot while it holds its leader lease, and
// cannot defer to anyone. So a member also watches the leader leases of its roles and holds nothing
// while one is held and renewed, by observation as above, however old its own lease is.

// foreignSighting is what this member saw of another group's member lease: its resourceVersion and
// when that changed, by this member's clock.
type foreignSighting struct {
	resourceVersion string
	changed         time.Time
}

// foreignMembers tracks the member leases of other groups by observation, as the observer tracks the
// group's own: a lease counts as live until it has stayed unchanged for its advertised duration (the
// returning grace, after a restart's leave marker). Only reconcile steps use it.
type foreignMembers struct {
	seen map[string]foreignSighting // by namespace/name
}

func sightingKey(l *coordinationv1.Lease) string { return l.Namespace + "/" + l.Name }

// observe records the leases of the other groups as of now and forgets those gone; seenAt says when
// a version was first seen (Coordinator.seenAt).
func (f *foreignMembers) observe(list []*coordinationv1.Lease, now time.Time, seenAt func(*coordinationv1.Lease, time.Time) time.Time) {
	if f.seen == nil {
		f.seen = map[string]foreignSighting{}
	}
	present := make(map[string]bool, len(list))
	for _, l := range list {
		key := sightingKey(l)
		present[key] = true
		if s, ok := f.seen[key]; ok && s.resourceVersion == l.ResourceVersion {
			continue
		}
		f.seen[key] = foreignSighting{resourceVersion: l.ResourceVersion, changed: firstChange(l, seenAt(l, now), f.seen[key])}
	}
	for name := range f.seen {
		if !present[name] {
			delete(f.seen, name)
		}
	}
}

// firstChange is when a lease seen at now with a new resourceVersion changed: now, unless this is the
// first sighting of a lease whose renewTime is over two of its durations old by this member's clock,
// which is dead already whatever the clocks' skew.
func firstChange(l *coordinationv1.Lease, now time.Time, before foreignSighting) time.Time {
	if before.resourceVersion != "" || l.Spec.RenewTime == nil {
		return now
	}
	d := leases.AdvertOf("", l).Duration
	if d > 0 && now.Sub(l.Spec.RenewTime.Time) > 2*d {
		return l.Spec.RenewTime.Time
	}
	return now
}

// live reports whether another group's member lease l still counts as acting at now: it names its
// member as holder, has no leave marker for good, and changed within its duration (at least
// fallback), or within the returning grace after a restart's leave marker.
func (f *foreignMembers) live(l *coordinationv1.Lease, fallback time.Duration, now time.Time) bool {
	window, ok := memberWindow(l, fallback)
	return ok && f.changedWithin(l, window, now)
}

// memberWindow is how long another group's member lease l counts as acting after a change (see
// live); false when it does not at all.
func memberWindow(l *coordinationv1.Lease, fallback time.Duration) (time.Duration, bool) {
	member, ok := foreignMemberOf(l)
	if !ok {
		return 0, false
	}
	advert := leases.AdvertOf(member, l)
	if !advert.Held || (advert.Left && advert.Returning == 0) {
		return 0, false
	}
	window := max(advert.Duration, fallback)
	if advert.Left {
		window = max(window, advert.Returning)
	}
	return window, true
}

// leaderLive reports whether a leader lease l of the original's mode still counts as acting at now:
// it names a holder (a leader that stops clears it) and changed within its duration (at least
// fallback).
func (f *foreignMembers) leaderLive(l *coordinationv1.Lease, fallback time.Duration, now time.Time) bool {
	window, ok := leaderWindow(l, fallback)
	return ok && f.changedWithin(l, window, now)
}

// leaderWindow is how long a leader lease l counts as acting after a change (see leaderLive); false
// when it does not at all.
func leaderWindow(l *coordinationv1.Lease, fallback time.Duration) (time.Duration, bool) {
	if leases.Holder(l) == "" {
		return 0, false
	}
	return max(leases.AdvertOf("", l).Duration, fallback), true
}

// expiresIn is how long after now l stops counting as changed within window, unless it changes.
func (f *foreignMembers) expiresIn(l *coordinationv1.Lease, window time.Duration, now time.Time) time.Duration {
	s, seen := f.seen[sightingKey(l)]
	if !seen {
		return window
	}
	return s.changed.Add(window).Sub(now)
}

// changedWithin reports whether l was seen to change within window before now; a lease not observed
// yet counts as changed now.
func (f *foreignMembers) changedWithin(l *coordinationv1.Lease, window time.Duration, now time.Time) bool {
	return f.expiresIn(l, window, now) > 0
}

// foreignMemberOf returns the member of another group's member lease, from its group label and name.
func foreignMemberOf(l *coordinationv1.Lease) (string, bool) {
	group := l.Labels[leases.GroupLabel]
	if group == "" {
		return "", false
	}
	return leases.MemberOf(group, l)
}

// rolesOf returns the roles settings advertise; nil when they name none, which overlaps every role.
func rolesOf(settings string) []string {
	roles := settingsFields(settings)["roles"]
	if roles == "" {
		return nil
	}
	return strings.Split(roles, "+")
}

// overlap reports whether two role lists share a role; an empty list (unknown) overlaps any.
func overlap(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	return slices.ContainsFunc(a, func(r string) bool { return slices.Contains(b, r) })
}

// senior reports whether member lease a was created before b (by the API server's clock; the name
// breaks a tie), so that two groups agree on which of them defers. A lease not created yet (nil) is
// junior to any.
func senior(a, b *coordinationv1.Lease) bool {
	switch {
	case a == nil:
		return false
	case b == nil:
		return true
	case !a.CreationTimestamp.Equal(&b.CreationTimestamp):
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// incumbents lists, sorted, the live members of other groups that run a role of this member's and
// whose member leases are senior to its own (by name), and the live leader leases of its roles (by
// namespace/name); empty when there are no such listers. until is how long after now the first of
// them expires unless it renews: renewals start no reconcile (Runner), so one comes then.
func (c *Coordinator) incumbents(snap snapshot, now time.Time) (out []string, until time.Duration) {
	var members, leaders []*coordinationv1.Lease
	if c.cfg.Foreign != nil {
		members = c.cfg.Foreign.List()
	}
	if c.cfg.Leaders != nil {
		leaders = c.cfg.Leaders.List()
	}
	c.foreign.observe(append(slices.Clip(members), leaders...), now, c.seenAt)
	own := snap.members[c.cfg.Member]
	roles := rolesOf(c.cfg.Settings)
	if dryRun(c.cfg.Settings) {
		return nil, 0 // it acts on no shoot: beside anyone
	}
	until = time.Duration(math.MaxInt64)
	for _, l := range members {
		if l.Labels[leases.GroupLabel] == c.cfg.Group || !c.foreign.live(l, c.cfg.LeaseDuration, now) ||
			dryRun(l.Annotations[leases.SettingsAnnotation]) {
			continue
		}
		if overlap(roles, rolesOf(l.Annotations[leases.SettingsAnnotation])) && senior(l, own) {
			out = append(out, l.Name)
			window, _ := memberWindow(l, c.cfg.LeaseDuration)
			until = min(until, c.foreign.expiresIn(l, window, now))
		}
	}
	for _, l := range leaders {
		if c.foreign.leaderLive(l, c.cfg.LeaseDuration, now) {
			out = append(out, sightingKey(l))
			window, _ := leaderWindow(l, c.cfg.LeaseDuration)
			until = min(until, c.foreign.expiresIn(l, window, now))
		}
	}
	sort.Strings(out)
	return out, until
}

// DeferringTo names the member leases of other groups this member deferred to at its last reconcile
// (see deferToIncumbents); "" when none.
func (c *Coordinator) DeferringTo() string {
	if d := c.deferringTo.Load(); d != nil {
		return *d
	}
	return ""
}

// deferToIncumbents releases every held partition and reports true while live members of other
// groups with an overlapping role are senior to this member, with how long until the first of them
// expires unless it renews; it logs, counts and records an Event when that changes.
func (c *Coordinator) deferToIncumbents(ctx context.Context, snap snapshot, now time.Time) (bool, time.Duration, error) {
	incumbents, until := c.incumbents(snap, now)
	described := strings.Join(incumbents, ", ")
	c.metrics.foreignMembers.Set(float64(len(incumbents)))
	c.deferringTo.Store(&described)
	transition(&c.checks.incumbents, described, func() {
		c.log.Info("Another group's members that were there first, or a leader of the original's mode, run this group's roles: holding no partition while they are live",
			"leases", described)
		c.event(corev1.EventTypeWarning, "ForeignGroupActive", ActionRebalance, fmt.Sprintf(
			"Live members of another group that were there first, or a leader of the original's mode, run a role of this group (%s); this member holds no partition while they are live, so that no shoot has two actors", described))
	}, func() {
		c.log.Info("No other group or leader acts on this group's roles any more; acquiring partitions again")
		c.event(corev1.EventTypeNormal, "ForeignGroupGone", ActionRebalance,
			"No live member of another group or leader of the original's mode runs this group's roles any more; this member acquires its share again")
	})
	if len(incumbents) == 0 {
		return false, 0, nil
	}
	held := c.Held()
	sort.Ints(held)
	errs := c.forEach(ctx, held, func(p int) error { return c.release(ctx, p, snap.parts[p], "") })
	return true, until, errors.Join(errs...)
}
