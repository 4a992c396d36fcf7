package sharding

import (
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// acquired records that process p starts the work of partition part. The work must start on p's own
// write of the lease whose answer p got, the store must still hold that write (unless a person
// changed the lease since), and no other incarnation may act on the partition now.
func (s *simulation) acquired(p *simProc, part int) {
	s.actingMu.Lock()
	defer s.actingMu.Unlock()
	if p.gone() {
		s.fail("%s starts partition %d while it exits", p.incarnation, part)
		return
	}
	s.checkOwnWrite(p, part)
	for _, inc := range sortedKeys(s.acting[part]) {
		if a := s.acting[part][inc]; inc != p.incarnation && a.active(s.now) && !s.overlapExcused(a, part) {
			s.fail("partition %d acted on by %s (since t=%s) and %s at once", part, inc, a.since.Sub(s.start), p.incarnation)
		}
	}
	s.acting[part][p.incarnation] = &simAct{proc: p, since: s.now}
	s.trace("%s acquired %d", p.incarnation, part)
	s.acquisitions = append(s.acquisitions, simAcquisition{at: s.now, part: part, name: p.name})
	if r, ok := s.reserved[part]; ok && r != p.name {
		s.fail("partition %d, reserved for the returning member %s, acquired by %s", part, r, p.incarnation)
	}
}

// checkOwnWrite checks that p starts partition part on its own answered write, still stored.
func (s *simulation) checkOwnWrite(p *simProc, part int) {
	p.coordinator.mu.RLock()
	var own *coordinationv1.Lease
	if hp := p.coordinator.held[part]; hp != nil {
		own = hp.lease
	}
	p.coordinator.mu.RUnlock()
	switch {
	case own == nil:
		s.fail("%s starts partition %d without a lease", p.incarnation, part)
		return
	}
	answeredAt, answered := s.answered[simAnswer{incarnation: p.incarnation, version: own.ResourceVersion}]
	if leases.Holder(own) != p.name || leases.Incarnation(own) != p.incarnation || !answered {
		s.fail("%s starts partition %d on a lease it did not write or whose answer it did not get (holder %q, incarnation %q, version %s)",
			p.incarnation, part, leases.Holder(own), leases.Incarnation(own), own.ResourceVersion)
		return
	}
	stored, err := s.store.Get(p.ctx, own.Name)
	if f := s.foreign[part]; (err != nil || stored.ResourceVersion != own.ResourceVersion) && !(f.set && !f.at.Before(answeredAt)) {
		s.fail("%s starts partition %d on version %s, but the store has moved on to %s (holder %q)",
			p.incarnation, part, own.ResourceVersion, versionOf(stored), leases.Holder(stored))
	}
}

func versionOf(l *coordinationv1.Lease) string {
	if l == nil {
		return "none"
	}
	return l.ResourceVersion
}

// released records that process p stops the work of partition part. The work keeps acting until the
// stop ends, one stop latency from now, and the loop that stops it is busy until then.
func (s *simulation) released(p *simProc, part int) {
	s.actingMu.Lock()
	defer s.actingMu.Unlock()
	a := s.acting[part][p.incarnation]
	if a == nil || p.phase == procGone {
		return
	}
	x := p.stopLatency(part, s.now)
	s.trace("%s released %d (stop takes %s)", p.incarnation, part, x)
	if x == 0 {
		delete(s.acting[part], p.incarnation)
		return
	}
	a.until = s.now.Add(x)
	if p.phase == procLeaving && s.running != nil {
		// Coordinator.Leave stops the partitions side by side (the Runner's write concurrency), and
		// this simulation, which runs it one partition at a time in the map order of the held set,
		// must not make the order matter.
		a.until = s.running.since.Add(x)
	}
	if !p.exitAt.IsZero() && a.until.After(p.exitAt) {
		a.until = p.exitAt
	}
	if loop := s.running; loop != nil && loop.busyUntil.Before(a.until) {
		loop.busyUntil = a.until
	}
}

// excused reports whether a, acting on part, may overlap another actor: a person changed or deleted
// the partition's lease after a started, and a's process has not reconciled on a cache that shows it
// yet. Nothing but its own cache can tell a holder that someone else wrote its lease.
func (s *simulation) excused(a *simAct, part int) bool {
	f := s.foreign[part]
	return f.set && !a.since.After(f.at) && a.proc.reconciledFrom <= f.index
}

// overlapExcused reports whether a may overlap another actor on part: it is excused, and, when the
// simulation is strict about deletions (strictDeletes), the person's write named another holder
// rather than deleting the lease or clearing its holder.
func (s *simulation) overlapExcused(a *simAct, part int) bool {
	return s.excused(a, part) && !(s.strictDeletes && s.foreign[part].vacated)
}

// checkActing ends the stops that are over and checks that no partition is acted on by two
// incarnations at once.
func (s *simulation) checkActing() {
	s.actingMu.Lock()
	defer s.actingMu.Unlock()
	for part, acts := range s.acting {
		var actors []string
		for inc, a := range acts {
			if !a.until.IsZero() && !a.until.After(s.now) {
				delete(acts, inc)
			} else if a.active(s.now) && !s.overlapExcused(a, part) {
				actors = append(actors, inc)
			}
		}
		if len(actors) > 1 {
			slices.Sort(actors)
			s.fail("partition %d acted on by %v at once", part, actors)
			return
		}
	}
}

// checkSafety checks that every process acts only on partitions whose stored lease names it and its
// incarnation (unless a person wrote the lease and the process has not seen it yet).
func (s *simulation) checkSafety() {
	stored := map[string]*coordinationv1.Lease{}
	for _, l := range s.store.List() {
		stored[l.Name] = l
	}
	for _, p := range s.procs {
		if p.gone() || p.paused() {
			continue
		}
		held := p.coordinator.Held()
		slices.Sort(held)
		for _, part := range held {
			l := stored[leases.PartitionLeaseName(simGroup, part)]
			if l != nil && leases.Holder(l) == p.name && leases.Incarnation(l) == p.incarnation {
				continue
			}
			if a := s.acting[part][p.incarnation]; a != nil && s.excused(a, part) {
				continue
			}
			s.fail("%s acts on partition %d whose lease names %q (incarnation %q)", p.incarnation, part,
				leases.Holder(l), incarnationOf(l))
			return
		}
	}
}

func incarnationOf(l *coordinationv1.Lease) string {
	if l == nil {
		return "no lease"
	}
	return leases.Incarnation(l)
}

// inService returns the processes that should hold the member lease of their name and a share of
// the partitions, in name order: running, not exiting, not replaced by another process under their
// name, not stepped down.
func (s *simulation) inService() []*simProc {
	var procs []*simProc
	for _, p := range s.procs {
		if p.phase == procRunning && !p.gone() && !p.identityLost && !s.now.Before(p.downUntil) {
			procs = append(procs, p)
		}
	}
	slices.SortFunc(procs, func(a, b *simProc) int { return compareStrings(a.name, b.name) })
	return procs
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkLiveness checks that every process in service holds its member lease and that every
// partition is acted on by its owner on the ring of those processes, and by nobody else. It is
// skipped while processes in service disagree on the settings (the group freezes by design) or one
// has just come back from a step-down; it reports whether it checked and passed.
func (s *simulation) checkLiveness(when string) bool {
	if !s.liveness || s.failure != nil {
		return false
	}
	procs := s.inService()
	if reason := s.livenessSkipped(procs); reason != "" {
		s.count("liveness check skipped: " + reason)
		return false
	}
	names := make([]string, len(procs))
	for i, p := range procs {
		names[i] = p.name
		if p.member.Fenced(p.clock.Now()) {
			s.failLiveness("%s, %s (in service) is still fenced", when, p.incarnation)
			return false
		}
	}
	ring, err := NewRing(names, procs[0].cfg.ring)
	if err != nil {
		s.failLiveness("ring: %v", err)
		return false
	}
	if !s.ownersAct(ring, when) {
		return false
	}
	s.count("liveness checks passed")
	return true
}

// waitOutRevivals runs the simulation on, without faults, while a process in service counts a
// member live whose lease nobody renews, since a moment after the heal: a process whose renewals
// failed for a while (an outage of its own, or a step-down) defers the expiry of every member that
// was live when its failures began, by design; a new process counts a member it sees for the first
// time live for a lease duration. Until a lease duration later its ring includes the member, and some
// partitions stay unheld; a few seconds more let them settle once it has dropped the member.
func (s *simulation) waitOutRevivals() {
	for range 4 { // another orphan may be deleted, and revived, while it waits
		end, cause := s.revivalsEnd()
		if !end.After(s.now) {
			return
		}
		s.count("liveness check delayed: a stale member lease counted live again (" + cause + ")")
		s.advance(end.Sub(s.now), false)
	}
}

// revivalsEnd returns when the last revival of a member no process in service runs as ends, plus a
// few seconds to settle, and what caused it.
func (s *simulation) revivalsEnd() (end time.Time, cause string) {
	procs := s.inService()
	inService := map[string]bool{}
	for _, p := range procs {
		inService[p.name] = true
	}
	for _, p := range procs {
		for _, m := range p.coordinator.observer.Members() {
			since, _, _ := p.coordinator.observer.Seen(m)
			if inService[m] || !p.simTime(since).After(s.lastFault) {
				continue
			}
			end = simLater(end, p.simTime(since).Add(simLeaseDuration+simGracefulWindow))
			switch {
			case p.simTime(since).Sub(p.booted) <= simStep:
				cause = "first seen when the process started, by design"
			case !p.downUntil.IsZero() && p.simTime(since).Sub(p.downUntil).Abs() <= simRetryPeriod:
				cause = "deferred when the process came back from a step-down, by design"
			default:
				cause = "deferred by a process whose renewals had failed"
			}
		}
	}
	return end, cause
}

func (s *simulation) livenessSkipped(procs []*simProc) string {
	if len(procs) == 0 {
		return "no process in service"
	}
	for _, p := range procs {
		if p.cfg.settings != procs[0].cfg.settings {
			return "settings disagree"
		}
	}
	for _, p := range s.procs {
		if !p.downUntil.IsZero() && !p.downUntil.After(s.now) && s.now.Sub(p.downUntil) < simQuiet {
			return "a process has just come back from a step-down"
		}
	}
	return ""
}

// ownersAct checks that every partition is acted on by its ring owner alone, whose lease it is.
func (s *simulation) ownersAct(ring *Ring, when string) bool {
	return s.actedOnBy(ring.Assignment(), when)
}

// actedOnBy checks that every partition with an owner in owners ("" skips one) is acted on by that
// owner alone.
func (s *simulation) actedOnBy(owners []string, when string) bool {
	s.actingMu.Lock()
	defer s.actingMu.Unlock()
	for part, owner := range owners {
		if owner == "" {
			continue
		}
		var actors []string
		for _, inc := range sortedKeys(s.acting[part]) {
			if a := s.acting[part][inc]; a.active(s.now) {
				actors = append(actors, inc)
			}
		}
		if len(actors) != 1 || s.acting[part][actors[0]].proc.name != owner {
			s.failLiveness("%s (%s after the last fault), partition %d is acted on by %v, want %q alone",
				when, s.now.Sub(s.lastFault), part, actors, owner)
			return false
		}
	}
	return true
}
