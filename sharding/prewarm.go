package sharding

import (
	"slices"
	"time"
)

// PrewarmLead is how long before a silent member's lease expires the caches start to hold the
// partitions this member would take from it: about the time a cache takes to list a share's worth of
// a third of the seed under load (1–3 s at 5,000 shoots, docs/caches.md), with a margin.
const PrewarmLead = 5 * time.Second

// prewarm adds to hold the partitions this member would own if the one member gone silent expired:
// its lease unchanged for at least three retry periods and due to expire within PrewarmLead. The
// caches list them while that member may still renew, so that a crash is taken over as soon as its
// lease expires, not a list later; the partitions are acquired only then, as ever. It does so only
// while this member's own renewals reach the API server (the cache shows one sent within three retry
// periods) and only for a single silent member: when the API server is slow every member looks
// silent, and caching every share then would load the server and the replicas when they can least
// afford it. A member that renews again drops out of hold at the next reconcile.
//
// A member that announced its leave (leases.Member.AnnounceLeave) counts as the silent one, ahead of
// any other: its partitions are listed while it still works on them, so that they are acquired as
// soon as it releases them, not a list later.
func (c *Coordinator) prewarm(hold []bool, now time.Time) {
	silent, leaving := c.leavingMember(now), true
	if silent == "" {
		silent, leaving = c.silentMember(now), false
	}
	switch {
	case silent == c.prewarmFor || silent == "":
	case leaving:
		c.log.Info("A member announced its leave: the caches list the partitions this member will take from it, ahead of its release",
			"leaving", silent, "group", c.cfg.Group)
	default:
		c.log.Info("A member has not renewed its lease: the caches list the partitions this member would take from it, ahead of its expiry",
			"silent", silent, "group", c.cfg.Group)
	}
	c.prewarmFor = silent
	if !leaving {
		c.ranAheadFor = ""
	}
	if silent == "" || c.rings.all == nil {
		return
	}
	ring, err := c.ringOver(c.prewarmRing, slices.DeleteFunc(slices.Clone(c.rings.all.Members()), func(m string) bool { return m == silent }))
	if err != nil {
		return
	}
	c.prewarmRing = ring
	// What this member will hand to another once a leaver has left goes the way of the leaver's share,
	// a moment after it: its work due right after is run ahead too, once per leave, its stop reckoned
	// from the first sight of the announcement.
	ahead := leaving && silent != c.ranAheadFor
	var handing []int
	for p, owner := range ring.Assignment() {
		if owner == c.cfg.Member && p < len(hold) {
			hold[p] = true
		}
		if ahead && owner != c.cfg.Member && c.Holds(p) {
			handing = append(handing, p)
		}
	}
	if ahead {
		c.ranAheadFor = silent
		c.runAhead(handing, now.Add(LeaveLead), RunAheadWindow)
	}
}

// silentMember returns the one live member other than this one that has gone silent (see prewarm),
// or "" when none has, this member's own renewals do not show, or more than one other member has been
// quiet for three retry periods: in a brownout the members fall quiet one renewal apart, so the
// first must not count as alone while the others are quiet too, only not as long.
func (c *Coordinator) silentMember(now time.Time) string {
	quiet := 3 * c.cfg.RetryPeriod
	if c.shownRenewal.IsZero() || now.Sub(c.shownRenewal) > quiet || c.rings.all == nil {
		return ""
	}
	var quietMembers []string
	for _, m := range c.rings.all.Members() {
		since, advert, ok := c.observer.Seen(m)
		if m == c.cfg.Member || !ok || advert.Left || !c.observer.Live(m, now) || now.Sub(since) < quiet {
			continue
		}
		quietMembers = append(quietMembers, m)
	}
	if len(quietMembers) != 1 {
		return ""
	}
	if left, _ := c.observer.ExpiresIn(quietMembers[0], now); left > PrewarmLead {
		return ""
	}
	return quietMembers[0]
}

// untilPrewarm returns how long after now the next live member other than this one that has not
// renewed would have gone silent (see silentMember: quiet for three retry periods and due to expire
// within PrewarmLead), so that a reconcile comes then: renewals start no reconcile (Runner), and the
// retry period's would start the list up to a period late. False when there are no caches to warm or
// no such moment ahead.
func (c *Coordinator) untilPrewarm(now time.Time) (time.Duration, bool) {
	if c.cfg.Caches == nil {
		return 0, false
	}
	var next time.Duration
	found := false
	for _, m := range c.observer.LiveMembers(now) {
		since, advert, ok := c.observer.Seen(m)
		left, _ := c.observer.ExpiresIn(m, now) // m is live
		if m == c.cfg.Member || !ok || advert.Left {
			continue
		}
		at := since.Add(3 * c.cfg.RetryPeriod)
		if soon := now.Add(left - PrewarmLead); soon.After(at) {
			at = soon
		}
		if d := at.Sub(now); d > 0 && (!found || d < next) {
			next, found = d, true
		}
	}
	return next, found
}

// leavingMember returns the one live member other than this one that announced its leave and has
// not left yet, or "" when none or more than one has (a scale-in by several at once: the caches would
// otherwise hold most of the seed).
func (c *Coordinator) leavingMember(now time.Time) string {
	if c.rings.all == nil {
		return ""
	}
	leaving := ""
	for _, m := range c.rings.all.Members() {
		_, advert, ok := c.observer.Seen(m)
		if m == c.cfg.Member || !ok || !advert.Leaving || advert.Left || !c.observer.Live(m, now) {
			continue
		}
		if leaving != "" {
			return ""
		}
		leaving = m
	}
	return leaving
}

// OthersLive reports whether the last reconcile saw another live member of the ring, one that could
// take this member's partitions over.
func (c *Coordinator) OthersLive() bool {
	return c.othersLive.Load()
}
