package sharding

import (
	"time"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// simReturn is the successor of a member that stopped to restart: it boots, in a new Pod, at at or
// as soon as its predecessor has exited, whichever is later (a StatefulSet recreates a Pod only
// after the old one is gone).
type simReturn struct {
	at   time.Time
	name string
	cfg  simConfig
}

// returnAfter schedules the successor of p, d from now.
func (s *simulation) returnAfter(p *simProc, d time.Duration) {
	cfg, _ := s.bootConfig()
	s.returns = append(s.returns, simReturn{at: s.now.Add(d), name: p.name, cfg: cfg})
}

// returnNow makes every pending successor come back at once, with the group's settings.
func (s *simulation) returnNow() {
	for i := range s.returns {
		s.returns[i].at, s.returns[i].cfg = s.now, s.groupConfig()
	}
}

// bootReturns boots the successors that are due and whose predecessor has exited.
func (s *simulation) bootReturns() {
	var pending []simReturn
	for _, r := range s.returns {
		if s.now.Before(r.at) || len(s.procsOf(r.name)) > 0 {
			pending = append(pending, r)
			continue
		}
		s.boot(r.name, r.cfg, s.newPod(r.name))
	}
	s.returns = pending
}

func (s *simulation) returnPending(name string) bool {
	for _, r := range s.returns {
		if r.name == name {
			return true
		}
	}
	return false
}

// scenario plays, now and then, a change that needs a settled group to be checked: a global outage,
// or a graceful change after which the group must settle within a few seconds. It needs a group
// without members stepped down after fencing too often.
func (s *simulation) scenario() {
	if s.steppedDownSince(s.now.Add(-simQuiet)) {
		return // a member that steps down or comes back changes the ring in the middle
	}
	switch s.rng.IntN(7) {
	case 0:
		s.outage(!s.staleMemberLeases(s.inService()))
	case 1:
		s.gracefulLeave(s.rng.IntN(4) == 0)
	case 2:
		s.gracefulReturn()
	case 3:
		s.gracefulJoin()
	}
}

// outage cuts every process off from the store for 60 s at once, as an API server outage does, then
// lets the group recover without other faults: every member fences, and once the store is back no
// partition may change its holder because of the outage (members must not count each other's
// silence during it). Partitions do move when a member lease nobody renews is around (a crashed
// member's, or a ghost: see TestSimulatedOutageWithAStaleMemberLease), and when the outage's fence
// was a member's third within the flap window, so that it steps down by design; unless strict, or
// then, the moves are only counted. Liveness after the quiet period is checked in any case.
func (s *simulation) outage(strict bool) {
	holders := map[int]string{}
	for _, p := range s.inService() {
		for _, part := range p.coordinator.Held() {
			holders[part] = p.name
		}
	}
	from, began := len(s.acquisitions), s.now
	for _, p := range s.procs {
		s.cut(p, time.Minute)
	}
	s.count("global outage 60 s")
	s.lastFault = s.now
	s.advance(time.Minute+simQuiet, false)
	moved := "partition moved after a global outage with a stale member lease around"
	if s.steppedDownSince(began) {
		strict, moved = false, "partition moved after a global outage: a member stepped down (fenced too often)"
	}
	for _, a := range s.acquisitions[from:] {
		if was, ok := holders[a.part]; ok && was != a.name {
			if strict {
				s.failLiveness("after a global outage, partition %d moved from %s to %s", a.part, was, a.name)
				return
			}
			s.count(moved)
		}
	}
	s.waitOutRevivals()
	s.checkLiveness("after a global outage")
}

func (s *simulation) steppedDownSince(t time.Time) bool {
	for _, p := range s.procs {
		if p.downUntil.After(t) {
			return true
		}
	}
	return false
}

// gracefulLeave stops a process gracefully, handing its share over (as a member leaving for good
// when departing): its partitions must be acted on by their new owners within a few seconds.
func (s *simulation) gracefulLeave(departing bool) {
	procs := s.inService()
	if len(procs) < 3 {
		return
	}
	s.lastFault = s.now
	s.startLeave(procs[s.rng.IntN(len(procs))], 0, departing)
	kind := "graceful leave"
	if departing {
		kind = "departing leave"
	}
	s.count(kind + ", checked after 3 s")
	s.advance(simGracefulWindow, false)
	s.checkLiveness("3 s after a " + kind)
}

// gracefulReturn restarts a process gracefully: it leaves returning, and its successor comes back
// within the grace. Nobody else may take its partitions meanwhile, and within a few seconds of the
// successor's start it must act on all of them again. A successor that sees a member lease nobody
// renews counts it live for a lease duration (its observer has not seen it change yet), so with such
// leases around the group settles only then.
func (s *simulation) gracefulReturn() {
	procs := s.inService()
	if len(procs) < 2 {
		return
	}
	p := procs[s.rng.IntN(len(procs))]
	stale := s.staleMemberLeases(procs)
	for _, part := range p.coordinator.Held() {
		s.reserved[part] = p.name
	}
	s.lastFault = s.now
	s.startLeave(p, simReturnGrace, false)
	d := time.Duration(1+s.rng.IntN(8)) * time.Second
	s.returns = append(s.returns, simReturn{at: s.now.Add(d), name: p.name, cfg: p.cfg})
	s.advance(d, false)
	s.settle(stale, "returning restart")
	clear(s.reserved)
}

// gracefulJoin adds a member: it must act on its share within a few seconds.
func (s *simulation) gracefulJoin() {
	if len(s.names) >= simMaxNames {
		return
	}
	stale := s.staleMemberLeases(s.inService())
	s.lastFault = s.now
	s.join()
	s.settle(stale, "join")
}

// settle checks liveness a few seconds after a graceful change, or after a quiet period when stale
// member leases are around.
func (s *simulation) settle(stale bool, change string) {
	s.advance(simGracefulWindow, false)
	if stale {
		s.count(change + ", checked after the quiet period (stale member leases)")
		s.advance(simQuiet, false)
		s.waitOutRevivals()
		s.checkLiveness("after a " + change + " with stale member leases around")
		return
	}
	s.count(change + ", checked after 3 s")
	s.checkLiveness("3 s after a " + change)
}

// staleMemberLeases reports whether the store holds a member lease of no process in service that
// does not say its member left for good: a crashed member's, or a ghost.
func (s *simulation) staleMemberLeases(procs []*simProc) bool {
	incarnations := map[string]string{}
	for _, p := range procs {
		incarnations[p.name] = p.incarnation
	}
	for _, l := range s.store.List() {
		m, ok := leases.MemberOf(simGroup, l)
		if !ok || incarnations[m] == leases.Incarnation(l) && leases.Holder(l) == m {
			continue
		}
		if a := leases.AdvertOf(m, l); !a.Left || a.Returning > 0 {
			return true
		}
	}
	return false
}
