package sharding

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// simFault is a fault injected at random; it reports what it did ("" when it found nothing to do).
type simFault struct {
	per10k int // odds per step, in ten-thousandths
	inject func(s *simulation) string
}

// simFaults are the faults, each rare enough that the protocol has time to act between two of them.
// memberConn injects the faults of single store calls (failed, ambiguous, late and slow writes, slow
// reads, a pause right after a write) and heal ends the faults that last.
var simFaults = []simFault{
	{30, (*simulation).join},
	{30, (*simulation).leave},
	{30, (*simulation).crashOne},
	{50, (*simulation).restart},
	{40, (*simulation).cutOff},
	{60, func(s *simulation) string { return s.watchDelay("long watch delay", 20*time.Second) }},
	{160, func(s *simulation) string { return s.watchDelay("short watch delay", time.Second) }},
	{15, (*simulation).duplicate},
	{15, (*simulation).pause},
	{40, (*simulation).slowStops},
	{15, (*simulation).foreignWrite},
	{15, (*simulation).deleteLease},
	{10, (*simulation).ghost},
	{20, (*simulation).returningRestart},
}

// injectFault picks at most one fault per step.
func (s *simulation) injectFault() {
	r := s.rng.IntN(10_000)
	for _, f := range simFaults {
		if r -= f.per10k; r < 0 {
			if kind := f.inject(s); kind != "" {
				s.count(kind)
				s.lastFault = s.now
			}
			return
		}
	}
}

// pick returns one of the processes matching at random, nil when none does.
func (s *simulation) pick(match func(*simProc) bool) *simProc {
	var candidates []*simProc
	for _, p := range s.procs {
		if !p.gone() && match(p) {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	return candidates[s.rng.IntN(len(candidates))]
}

func (s *simulation) runningCount() int {
	count := 0
	for _, p := range s.procs {
		if !p.gone() {
			count++
		}
	}
	return count
}

// bootConfig is what a process booted in chaos runs with: one in ten is skewed, with another load
// bound or other roles (settings the group must agree on: the group freezes while it runs), or with
// shorter lease timings (which only the advertised duration makes safe).
func (s *simulation) bootConfig() (simConfig, string) {
	cfg := s.groupConfig()
	if !s.chaos || s.rng.IntN(10) != 0 {
		return cfg, ""
	}
	switch s.rng.IntN(3) {
	case 0:
		cfg.skew, cfg.ring.LoadBound = "load bound", 1.25
		cfg.settings = Settings(cfg.ring, []string{"prober", "weeder"})
	case 1:
		cfg.skew, cfg.settings = "roles", Settings(cfg.ring, []string{"prober"})
	default:
		cfg.skew, cfg.leaseDuration, cfg.renewDeadline, cfg.retryPeriod = "lease timings", 8*time.Second, 5*time.Second, time.Second
		cfg.observed, cfg.fenceBudget = 8*time.Second, 1500*time.Millisecond
	}
	s.count("settings skew (" + cfg.skew + ")")
	return cfg, cfg.skew
}

func (s *simulation) join() string {
	if len(s.names) >= simMaxNames {
		return ""
	}
	name := fmt.Sprintf("dwd-%d", len(s.names))
	cfg, _ := s.bootConfig()
	s.boot(name, cfg, s.newPod(name))
	return "join"
}

// leave stops a process gracefully, handing its share over, in half the cases as a member leaving
// the group for good (a scale-down).
func (s *simulation) leave() string {
	p := s.pick(func(p *simProc) bool { return p.phase == procRunning })
	if p == nil || s.runningCount() <= 2 {
		return ""
	}
	departing := s.rng.IntN(2) == 0
	s.startLeave(p, 0, departing)
	if departing {
		return "leave (departing for good)"
	}
	return "leave"
}

func (s *simulation) crashOne() string {
	p := s.pick(func(*simProc) bool { return true })
	if p == nil || s.runningCount() <= 2 {
		return ""
	}
	s.crash(p)
	return "crash"
}

// restart boots a process under a name none runs under: in half the cases a container restart in
// the same Pod (its lease names the Pod, proof that its predecessor stopped), else a new Pod.
func (s *simulation) restart() string {
	var idle []*simName
	for _, n := range s.names {
		if len(s.procsOf(n.name)) == 0 && n.generation > 0 && !s.returnPending(n.name) {
			idle = append(idle, n)
		}
	}
	if len(idle) == 0 {
		return ""
	}
	n := idle[s.rng.IntN(len(idle))]
	cfg, _ := s.bootConfig()
	if s.rng.IntN(2) == 0 {
		s.boot(n.name, cfg, n.lastPod)
		return "restart (same Pod)"
	}
	s.boot(n.name, cfg, s.newPod(n.name))
	return "restart (new Pod)"
}

// cutOff cuts a process off from the store for up to 40 s: its calls are refused, or hang until
// their deadline.
func (s *simulation) cutOff() string {
	p := s.pick(func(p *simProc) bool { return !p.cutOff })
	if p == nil {
		return ""
	}
	s.cut(p, time.Duration(1+s.rng.IntN(40))*time.Second)
	if p.hanging {
		return "cut off (calls hang)"
	}
	return "cut off (calls refused)"
}

func (s *simulation) cut(p *simProc, d time.Duration) {
	p.cutOff, p.hanging, p.cutUntil = true, s.rng.IntN(2) == 0, s.now.Add(d)
}

func (s *simulation) watchDelay(kind string, max time.Duration) string {
	p := s.pick(func(*simProc) bool { return true })
	if p == nil {
		return ""
	}
	p.lag = time.Duration(s.rng.Int64N(int64(max)))
	return kind
}

// duplicate boots a second process under the name of a running one, in a new Pod, while the first
// keeps running (cut off from the store in half the cases): the new one must wait for proof that the
// first stopped, which it never gets while the first renews. It spares a name whose member lease a
// person has deleted: a new process that never saw the lease takes it at once (see
// TestSimulatedNewProcessAfterItsMemberLeaseWasDeleted).
func (s *simulation) duplicate() string {
	old := s.pick(func(p *simProc) bool { return p.phase == procRunning && len(s.procsOf(p.name)) == 1 })
	if old == nil {
		return ""
	}
	if _, err := s.store.Get(context.Background(), old.member.LeaseName()); err != nil {
		return ""
	}
	cfg, _ := s.bootConfig()
	s.boot(old.name, cfg, s.newPod(old.name))
	if s.rng.IntN(2) == 0 && !old.cutOff {
		s.cut(old, time.Duration(5+s.rng.IntN(36))*time.Second)
		return "duplicate (the old process cut off)"
	}
	return "duplicate"
}

// pausable reports whether p may pause now. A process whose stops are still under way is not paused:
// the checker counts its stopping work as acting until the stop ends (not knowing that Guard refuses
// its writes past the fence moment), and a pause would stretch that past any margin.
func (s *simulation) pausable(p *simProc) bool {
	return !p.paused() && p.latencyUntil.Before(s.now) &&
		!s.now.Before(p.memberLoop.busyUntil) && !s.now.Before(p.reconcileLoop.busyUntil)
}

// pause freezes a process for up to simMaxPause, longer than the lease duration: it does not tick,
// and resumes where it was with its clock jumped.
func (s *simulation) pause() string {
	p := s.pick(s.pausable)
	if p == nil {
		return ""
	}
	p.pausedUntil = s.now.Add(time.Duration(1+s.rng.IntN(int(simMaxPause/time.Second))) * time.Second)
	return "pause"
}

// slowStops makes every Released of a process take up to 4 s for a while: more than the Runner's
// fence budget (then the process exits), less than the margin D−R. In half the cases the process is
// overloaded as a whole, and its store calls hang for a while too.
func (s *simulation) slowStops() string {
	p := s.pick(func(p *simProc) bool { return !p.paused() && p.latencyUntil.Before(s.now) })
	if p == nil {
		return ""
	}
	p.latency = time.Duration(1+s.rng.IntN(20)) * simStep
	p.latencyUntil = s.now.Add(time.Duration(10+s.rng.IntN(50)) * time.Second)
	if s.rng.IntN(2) == 0 && !p.cutOff {
		s.cut(p, time.Duration(5+s.rng.IntN(20))*time.Second)
		p.hanging = true
		return "stop latency (and calls hang)"
	}
	return "stop latency"
}

// randomLease returns one of the stored Leases at random whose name has prefix.
func (s *simulation) randomLease(prefix string) *coordinationv1.Lease {
	var candidates []*coordinationv1.Lease
	for _, l := range s.store.List() {
		if len(l.Name) > len(prefix) && l.Name[:len(prefix)] == prefix {
			candidates = append(candidates, l)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	return candidates[s.rng.IntN(len(candidates))]
}

// foreignWrite changes the holder of a member or partition lease as a person would with kubectl edit:
// to nobody, to a name no member has, or to another member's name; the rest of the lease stays.
func (s *simulation) foreignWrite() string {
	kind := s.personsLease()
	l := s.randomLease(simGroup + "-" + kind + "-")
	if l == nil {
		return ""
	}
	holders := []string{"", "someone-else"}
	for _, n := range s.names {
		holders = append(holders, n.name)
	}
	holder := holders[s.rng.IntN(len(holders))]
	if holder == leases.Holder(l) {
		return ""
	}
	l.Spec.HolderIdentity = ptr.To(holder)
	s.personWrites(l.Name, func() error { _, err := s.store.Update(context.Background(), l); return err })
	return "foreign write (" + kind + " lease)"
}

// deleteLease deletes a member or partition lease as a person would.
func (s *simulation) deleteLease() string {
	kind := s.personsLease()
	l := s.randomLease(simGroup + "-" + kind + "-")
	if l == nil {
		return ""
	}
	s.personWrites(l.Name, func() error { return s.store.Delete(context.Background(), l.Name, "") })
	return "delete lease (" + kind + " lease)"
}

func (s *simulation) personsLease() string {
	if s.rng.IntN(2) == 0 {
		return leases.KindMember
	}
	return leases.KindPartition
}

// personWrites makes a person's write to the lease named name, remembering it for the checker when
// it is a partition lease.
func (s *simulation) personWrites(name string, write func() error) {
	s.logLen += len(s.store.Events(s.logLen))
	if err := write(); err != nil {
		s.t.Fatalf("a person's write to %s: %v", name, err)
	}
	if part, ok := partitionNamed(name); ok {
		l, err := s.store.Get(context.Background(), name)
		s.foreign[part] = simForeign{at: s.now, index: s.logLen, set: true, vacated: err != nil || leases.Holder(l) == ""}
	}
}

// partitionNamed returns the partition whose lease is named name.
func partitionNamed(name string) (int, bool) {
	for part := range simPartitions {
		if leases.PartitionLeaseName(simGroup, part) == name {
			return part, true
		}
	}
	return 0, false
}

// ghost writes the held member lease of a member that never runs, as a member killed during a
// scale-down leaves it: the others must not count it live for long, and delete it once orphaned.
func (s *simulation) ghost() string {
	if s.ghosts >= 3 {
		return ""
	}
	s.ghosts++
	name := fmt.Sprintf("ghost-%d", s.ghosts)
	cfg := s.groupConfig()
	now := metav1.NewMicroTime(s.now.Add(time.Duration(s.rng.IntN(20_000)-10_000) * time.Millisecond))
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leases.MemberLeaseName(simGroup, name),
			Labels:      map[string]string{leases.GroupLabel: simGroup, leases.KindLabel: leases.KindMember},
			Annotations: map[string]string{leases.IncarnationAnnotation: name + "/1", leases.SettingsAnnotation: cfg.settings}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), RenewTime: &now, AcquireTime: &now,
			LeaseDurationSeconds: ptr.To(int32(simLeaseDuration / time.Second))},
	}
	if _, err := s.store.Create(context.Background(), l); err != nil {
		s.t.Fatalf("writing a ghost lease: %v", err)
	}
	return "ghost lease"
}

// returningRestart stops a process gracefully to restart (its share stays reserved for the return
// grace) and boots its successor, in a new Pod, up to 25 s later: within the grace or not.
func (s *simulation) returningRestart() string {
	p := s.pick(func(p *simProc) bool { return p.phase == procRunning && len(s.procsOf(p.name)) == 1 })
	if p == nil {
		return ""
	}
	s.startLeave(p, simReturnGrace, false)
	s.returnAfter(p, time.Duration(1+s.rng.IntN(25))*time.Second)
	return "returning restart"
}

// heal ends the faults that last, as at the start of a quiet period: cut-offs, pauses, slow stops,
// long watch delays and writes in flight end; of two processes under one name the older is deleted;
// a skewed process is replaced by one with the group's settings; returning members come back.
func (s *simulation) heal() {
	for _, p := range s.procs {
		p.cutOff, p.lag = false, time.Duration(s.rng.IntN(300))*time.Millisecond
		p.latencyUntil = simEarlier(p.latencyUntil, s.now)
		if p.paused() {
			p.pausedUntil = s.now
		}
	}
	for i := range s.inflight {
		s.inflight[i].at = simEarlier(s.inflight[i].at, s.now)
	}
	for _, n := range s.names {
		procs := s.procsOf(n.name)
		for _, p := range procs[:max(len(procs)-1, 0)] {
			s.crash(p)
		}
	}
	for _, p := range slices.Clone(s.procs) {
		if p.phase == procRunning && p.cfg.settings != s.groupConfig().settings {
			s.crash(p)
			s.boot(p.name, s.groupConfig(), p.podUID)
		}
	}
	s.returnNow()
	s.lastFault = s.now
}

func simEarlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
