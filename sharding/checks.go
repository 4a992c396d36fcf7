package sharding

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// checks is what the last reconcile found about the group, for logging only changes.
type checks struct {
	mismatched string // members (and leases) with other settings, "" when none
	stale      bool   // this member's cache has missed its own renewals
	incumbents string // live senior members of other groups with a role of this member's, "" when none
}

// staleViewAfter is how long after a renewal was sent this member's cache must have shown it.
func (c *Coordinator) staleViewAfter() time.Duration {
	return 2 * c.cfg.RetryPeriod
}

// check reports whether this member may change what it holds: no live member advertises other
// settings, no partition lease is held under another partition count, and its own cache is fresh.
// It logs, counts and reports an Event when that changes.
func (c *Coordinator) check(snap snapshot, now time.Time) bool {
	mismatched, disagreeing := c.mismatched(snap, now)
	changed := transition(&c.checks.mismatched, mismatched, func() {
		c.log.Info("Group settings disagree", "own", c.cfg.Settings, "others", mismatched)
		c.event(corev1.EventTypeWarning, "SettingsMismatch", ActionRebalance,
			"Members with other settings are live; this member keeps what it holds and acquires nothing until they agree: "+mismatched)
	}, func() {
		c.log.Info("Group settings agree again")
		c.event(corev1.EventTypeNormal, "SettingsAgree", ActionRebalance,
			"The live members agree on the settings again; this member acquires and releases partitions again")
	})
	if changed == changedBetween {
		c.log.Info("Group settings disagree", "own", c.cfg.Settings, "others", mismatched)
	}
	c.metrics.mismatch.Set(float64(disagreeing))
	cachedOwn := ""
	if own := snap.members[c.cfg.Member]; own != nil {
		cachedOwn = own.ResourceVersion
	}
	stale := c.liveness.ViewStale(cachedOwn, now, c.staleViewAfter())
	if stale != c.checks.stale {
		c.checks.stale = stale
		c.log.Info("Own renewals missing from the Lease cache: no ring changes until it catches up", "stale", stale)
	}
	c.metrics.viewStale.Set(boolGauge(stale))
	return mismatched == "" && !stale
}

// mismatched lists the live members whose advertised settings differ from this member's, and the
// held partition leases written under another partition count, each entry ended by ";", and how
// many entries there are (the settings-mismatch gauge).
func (c *Coordinator) mismatched(snap snapshot, now time.Time) (description string, count int) {
	var out []string
	for m, l := range snap.members {
		if m == c.cfg.Member || !c.observer.Live(m, now) {
			continue
		}
		if advert := leases.AdvertOf(m, l); advert.Settings != c.cfg.Settings {
			out = append(out, fmt.Sprintf("%s advertises %q;", m, advert.Settings))
		}
	}
	sort.Strings(out)
	count = len(out)
	if snap.otherCount > 0 {
		out = append(out, fmt.Sprintf("%d held partition leases under another partition count;", snap.otherCount))
		count++
	}
	return strings.Join(out, " "), count
}

// stopForeignWrites stops, without writing anything, the work of every held partition whose lease
// the cache shows changed or deleted by someone else since this process wrote it: the lease is not
// this member's any more, whoever wrote it. It logs and records one Event for all of them.
func (c *Coordinator) stopForeignWrites(snap snapshot) {
	parts := snap.parts
	var ownSentAt time.Time
	if own := snap.members[c.cfg.Member]; own != nil {
		ownSentAt, _ = c.liveness.SentAt(own.ResourceVersion)
	}
	stopped := c.foreignWrites(parts, ownSentAt)
	for _, p := range stopped {
		c.stop(p, ReleaseLost)
		c.metrics.foreignWrites.Inc()
		c.log.V(1).Info("Partition lease written by someone else: stopped its work", "partition", p,
			"holder", leases.Holder(parts[p]), "deleted", parts[p] == nil)
	}
	if len(stopped) == 0 {
		return
	}
	c.rebalance.lostSome(len(stopped))
	c.log.Info("Partition leases written by someone else: stopped their work", "partitions", stopped)
	c.event(corev1.EventTypeWarning, "PartitionLeaseTaken", ActionFence,
		fmt.Sprintf("The leases of %d partitions (%s) were changed or deleted by someone else; their work stopped here",
			len(stopped), partitionLeaseNames(c.cfg.Group, stopped)))
}

// partitionLeaseNames lists the lease names of partitions, the first few only.
func partitionLeaseNames(group string, partitions []int) string {
	const shown = 5
	var names []string
	for _, p := range partitions[:min(len(partitions), shown)] {
		names = append(names, leases.PartitionLeaseName(group, p))
	}
	if len(partitions) > shown {
		names = append(names, fmt.Sprintf("and %d more", len(partitions)-shown))
	}
	return strings.Join(names, ", ")
}

// foreignWrite reports whether cached, the cache's copy of the held partition's lease, shows a write
// that is neither this process's own nor the one it replaced (a cache not caught up yet). A lease
// this process created and the cache does not show is gone once the cache shows a renewal of the
// member lease sent after the create's answer (ownSentAt): the cache delivers writes in order. The
// coordinator's lock is held.
func (hp *heldPartition) foreignWrite(cached *coordinationv1.Lease, ownSentAt time.Time) bool {
	switch {
	case cached == nil:
		return hp.shown || hp.base != nil || ownSentAt.After(hp.wroteAt)
	case cached.ResourceVersion == hp.lease.ResourceVersion:
		hp.shown = true
		return false
	case hp.base != nil && cached.ResourceVersion == hp.base.ResourceVersion && !hp.shown:
		return false
	}
	return true
}

// foreignWrites returns, sorted, the held partitions whose lease shows a foreign write (foreignWrite),
// under one hold of the lock.
func (c *Coordinator) foreignWrites(parts []*coordinationv1.Lease, ownSentAt time.Time) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found []int
	for p, hp := range c.held {
		if hp.foreignWrite(parts[p], ownSentAt) {
			found = append(found, p)
		}
	}
	sort.Ints(found)
	return found
}

// deleteOrphans deletes member leases whose member left for good or that have been unchanged for
// leases.OrphanedAfter durations, once no partition lease names their member, so that no restarted
// member counts a long-gone one as live. The delete carries the cached resourceVersion.
func (c *Coordinator) deleteOrphans(ctx context.Context, snap snapshot, now time.Time) {
	named := map[string]bool{}
	for _, l := range snap.parts {
		named[leases.Holder(l)] = true
	}
	for _, v := range snap.vanished {
		named[v.name] = true
	}
	for m, l := range snap.members {
		if m == c.cfg.Member || named[m] || !c.observer.Orphaned(m, now) {
			continue
		}
		err := c.store.Delete(ctx, l.Name, l.ResourceVersion)
		if err != nil && !isLostRace(err) {
			c.log.Error(err, "Deleting an orphaned member lease", "lease", l.Name)
			continue
		}
		// The observation stays: the cache may list the lease for a while yet, and a member seen again
		// would count as new and live. It is forgotten once the lease is gone from the cache.
		if err == nil {
			c.metrics.orphansDeleted.Inc()
			c.log.Info("Deleted an orphaned member lease", "lease", l.Name, "member", m)
		}
	}
}

// event records an Event when the Config asks for them.
func (c *Coordinator) event(eventType, reason, action, message string) {
	if c.cfg.Event != nil {
		c.cfg.Event(eventType, reason, action, message)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// breakage switches off single rules of the protocol. Only the simulation sets it, to prove that the
// checker catches a protocol without each rule (docs/sharding.md,
// "Rules, and what each protects against"); the zero value is the protocol.
type breakage struct {
	skipConfirmation   bool // the cache alone decides that a holder expired
	startBeforeWrite   bool // work starts before the compare-and-swap
	releaseBeforeStop  bool // the release is written before the work stops
	resumeWithoutWrite bool // a cached lease naming this member resumes work without a write
	expiryByRenewTime  bool // expiry judged by the holder's renewTime and this member's wall clock
	noEpochCheck       bool // a reply arriving after a fence may start work
	resumeUnproven     bool // a predecessor's partitions resume at once after a take of the member lease without proof
	ignoreVanished     bool // a partition lease deleted or cleared under its holder counts as free
	// resumeDespiteGap resumes a fenced partition without a write although the member lease was not
	// held continuously since the partition's write
	resumeDespiteGap bool
}

// liveByRenewTime is the broken expiry rule: renewTime plus the lease duration, on this member's clock.
func (c *Coordinator) liveByRenewTime(now time.Time) func(string) bool {
	members := map[string]*coordinationv1.Lease{}
	for _, l := range c.lister.List() {
		if m, ok := leases.MemberOf(c.cfg.Group, l); ok {
			members[m] = l
		}
	}
	return func(m string) bool {
		l := members[m]
		return l != nil && l.Spec.RenewTime != nil && now.Before(l.Spec.RenewTime.Add(c.cfg.LeaseDuration))
	}
}

// MayJoin is the member's leases.Member.MayJoin: it refuses to take the member lease while a live
// member of the group advertises other settings, so that the incumbents win a disagreement
// (docs/sharding.md, "A setting changed by a rolling update anyway: the incumbents win"): they never
// see this member, go on, and take its predecessor's share once the returning grace ends; this member
// waits, unready, until they are gone (the scale-to-0 procedure of a settings change). Live means
// held, not left for good, and renewed within its advertised duration (its return grace after a
// restart's leave marker) by this process's clock: a reading whose error only keeps this member out
// longer. It logs, counts and records an Event when the refusal begins and ends.
func (c *Coordinator) MayJoin(now time.Time) error {
	if c.lister == nil {
		return errors.New("the group's leases are not cached yet")
	}
	var others []string
	for _, l := range c.lister.List() {
		m, ok := leases.MemberOf(c.cfg.Group, l)
		if !ok || m == c.cfg.Member {
			continue
		}
		advert := leases.AdvertOf(m, l)
		if !advert.Held || advert.Settings == c.cfg.Settings || (advert.Left && advert.Returning == 0) || l.Spec.RenewTime == nil {
			continue
		}
		window := max(advert.Duration, c.cfg.LeaseDuration, advert.Returning)
		if now.Before(l.Spec.RenewTime.Add(window)) {
			others = append(others, fmt.Sprintf("%s advertises %q;", m, advert.Settings))
		}
	}
	sort.Strings(others)
	refused := strings.Join(others, " ")
	c.noteJoinRefusal(refused, len(others))
	if refused != "" {
		return fmt.Errorf("live members advertise other settings than this member's %q: %s", c.cfg.Settings, refused)
	}
	return nil
}

// noteJoinRefusal logs, counts and records an Event when the members that keep this one out change
// from none to some, or back.
func (c *Coordinator) noteJoinRefusal(refused string, count int) {
	c.joinMu.Lock()
	defer c.joinMu.Unlock()
	c.metrics.mismatch.Set(float64(count))
	transition(&c.joinRefused, refused, func() {
		c.log.Info("Live members of the group advertise other settings: not joining while they are live", "own", c.cfg.Settings, "others", refused)
		c.event(corev1.EventTypeWarning, "SettingsMismatch", ActionRebalance,
			"Live members of the group advertise other settings; this member does not join while they are live (the incumbents keep the shoots): "+refused)
	}, func() {
		c.log.Info("No live member disagrees on the settings any more: joining the group")
		c.event(corev1.EventTypeNormal, "SettingsAgree", ActionRebalance,
			"No live member of the group advertises other settings any more; this member joins it")
	})
}

// How a condition's description changed (transition).
const (
	unchanged      = iota
	changedBegan   // from none to some
	changedEnded   // from some to none
	changedBetween // from some to other
)

// transition stores now, the description of a condition ("" while it does not hold), in *last, and
// calls began when the condition begins and ended when it ends (nothing for a change between two
// descriptions), so that a condition logs and records one Event each way; it returns which change
// it was.
func transition(last *string, now string, began, ended func()) int {
	before := *last
	*last = now
	switch {
	case now == before:
		return unchanged
	case before == "":
		began()
		return changedBegan
	case now == "":
		ended()
		return changedEnded
	}
	return changedBetween
}

// JoinRefused says why the last MayJoin kept this member out of the group; "" when it did not.
func (c *Coordinator) JoinRefused() string {
	c.joinMu.Lock()
	defer c.joinMu.Unlock()
	return c.joinRefused
}
