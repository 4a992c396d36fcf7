package sharding

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// Scripted scenarios: the simulation driven through a narrow window on purpose, where a rule of the
// protocol is the only one that holds, or where the protocol fell short (or still falls short).

// settledGroup boots n members with the group's settings and lets them settle.
func (s *simulation) settledGroup(n int) []*simProc {
	procs := make([]*simProc, n)
	for i := range procs {
		s.join()
		procs[i] = s.procs[len(s.procs)-1]
	}
	s.advance(simQuiet, false)
	s.checkLiveness("after the group settled")
	return procs
}

// advanceTo runs the simulation, without faults, until t.
func (s *simulation) advanceTo(t time.Time) {
	s.advance(t.Sub(s.now), false)
}

// untilRenewed runs the simulation until p's member lease has just been renewed, and returns when
// that renewal was sent.
func (s *simulation) untilRenewed(p *simProc) time.Time {
	at := p.member.FenceAt()
	for s.failure == nil && p.member.FenceAt().Equal(at) {
		s.advance(simStep, false)
	}
	return p.simTime(p.member.FenceAt().Add(-p.cfg.renewDeadline))
}

// startAfterAFence plays the window the fence epoch check closes. Member v's renewals are refused
// for 7.5 s; at 6.6 s another member leaves, so v acquires some of its partitions, and v pauses
// right after the first acquire write until 16.4 s: after the others have taken v's partitions
// over (v's lease last changed at 0 s), but within the renew deadline of the reconcile that sent
// the write, so that the Runner's Healthy check lets v renew again. On resume v's member loop runs
// first: it fences (the fence moment, 10 s, has passed) and renews; then the reconcile reads the
// answer, sent before its deadline. Only the epoch check keeps v from starting a partition another
// member holds now. It reports whether the scenario reached its window.
func (s *simulation) startAfterAFence() bool {
	procs := s.settledGroup(3)
	v, w := procs[0], procs[1]
	t0 := s.untilRenewed(v)
	v.script.refuseRenewalsUntil = t0.Add(7500 * time.Millisecond)
	v.script.memberFirst = true
	s.advanceTo(t0.Add(6600 * time.Millisecond))
	v.script.pauseAfterAcquire = t0.Add(16400 * time.Millisecond)
	s.startLeave(w, 0, false)
	s.advance(15*time.Second, false)
	return v.script.pauseAfterAcquire.IsZero()
}

// slowStopOutsideTheFence plays a stop that the fence budget does not cover. Member v's renewals
// fail from 0 s on. At the fence moment, 10 s, v's reconcile loop runs first and finds v fenced:
// Coordinator.Reconcile stops every partition itself, and one of them hangs for 9 s in Released
// (a probe run stuck on a shoot's API server). Then v's member loop fences: Runner.onFence's Fence
// finds no partition left to stop, does not overrun its budget, and the process does not exit; the
// stuck stop still runs when the others take v's partitions over after 15 s.
func (s *simulation) slowStopOutsideTheFence() {
	procs := s.settledGroup(3)
	v := procs[0]
	t0 := s.untilRenewed(v)
	v.script.refuseRenewalsUntil = t0.Add(time.Minute)
	v.script.reconcileFirst = true
	held := v.coordinator.Held()
	slices.Sort(held)
	v.script.slowStops = map[int]time.Duration{held[0]: 9 * time.Second}
	fenceAt := v.simTime(v.member.FenceAt())
	s.advanceTo(fenceAt.Add(-simStep))
	v.nextReconcile = fenceAt // a Lease event wakes the reconcile loop at the fence moment
	s.advance(15*time.Second, false)
}

// expiryFromAStaleCache plays the window the fresh read before a takeover closes. The own-cache
// check (Member.ViewStale) keeps a member from acting on a cache that misses its own renewals of
// more than 2·RP ago; a member whose renewals fail for a while has no recent renewals to miss. So:
// m's renewals are refused for up to 6 s, so that its lease, as p's cache shows it, last changed at
// m1; p renews at r (4 to 6 s after m1), then its watch falls 14 s behind and p is cut off until
// r+7.9 s; p renews again at r+8 s. Between m1+15 s and r+12 s, p is unfenced, not stale by its own
// check, and its cache says m's lease has not changed for a lease duration, while m renewed at about
// r+1 s and acts on. Only the fresh read of m's lease keeps p from taking m's partitions. It reports
// whether the scenario reached its window.
func (s *simulation) expiryFromAStaleCache() bool {
	procs := s.settledGroup(3)
	p, m := procs[0], procs[1]
	m1 := s.untilRenewed(m)
	r := p.nextStep
	for r.Before(m1.Add(4 * time.Second)) {
		r = r.Add(p.simDuration(p.cfg.retryPeriod))
	}
	m.script.refuseRenewalsUntil = r.Add(600 * time.Millisecond)
	s.advanceTo(r.Add(400 * time.Millisecond))
	renewed := p.simTime(p.member.FenceAt().Add(-p.cfg.renewDeadline))
	p.lag = 14 * time.Second
	s.cut(p, 7500*time.Millisecond)
	p.hanging = false
	s.advance(15*time.Second, false)
	return !renewed.Before(r.Add(-simStep)) && !renewed.After(r.Add(simStep))
}

// TestSimulatedScriptedWindows plays the scripted windows with the correct protocol: the checker
// stays green, and each window is reached with at least one seed.
func TestSimulatedScriptedWindows(t *testing.T) {
	for _, scenario := range []struct {
		name string
		play func(*simulation) bool
	}{
		{"expiry from a stale cache", (*simulation).expiryFromAStaleCache},
		{"start after a fence", (*simulation).startAfterAFence},
	} {
		t.Run(scenario.name, func(t *testing.T) {
			reached := 0
			for seed := uint64(1); seed <= simBrokenSeeds; seed++ {
				s := newSimulation(t, seed, correctProtocol)
				if scenario.play(s) {
					reached++
				}
				require.NoError(t, s.failure)
			}
			require.NotZero(t, reached, "no seed reached the window")
		})
	}
}

// TestSimulatedGracefulChangesSettleWithinSeconds checks, without faults, that every graceful change
// settles within a few seconds: a leave that hands the share over, a join, returning restarts, and
// a member leaving for good (its marker must reach every cache: a lease deleted right after it once
// kept the member in the others' rings for a lease duration).
func TestSimulatedGracefulChangesSettleWithinSeconds(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		s := newSimulation(t, seed, correctProtocol)
		s.settledGroup(4)
		s.gracefulLeave(false)
		s.gracefulJoin()
		s.gracefulReturn()
		s.gracefulLeave(true)
		s.gracefulReturn()
		require.NoError(t, s.failure)
		require.Equal(t, 5, s.faults["liveness checks passed"]-1, "every change was checked: %v", s.faults)
	}
}

// The scenarios below reproduced shortfalls of the protocol. Those fixed since run as regression
// tests; those still open are skipped with the reason, and fail when the skip is removed.

func TestSimulatedOutageWithAStaleMemberLease(t *testing.T) {
	s := newSimulation(t, 1, correctProtocol)
	procs := s.settledGroup(4)
	s.crash(procs[3])
	s.advance(simQuiet, false)
	require.True(t, s.checkLiveness("after a crash"), "settled: %v", s.failure)
	require.True(t, s.staleMemberLeases(s.inService()))
	s.outage(true)
	require.NoError(t, s.failure)
}

func TestSimulatedSlowStopOutsideTheFence(t *testing.T) {
	s := newSimulation(t, 1, correctProtocol)
	s.slowStopOutsideTheFence()
	require.NoError(t, s.failure)
}

func TestSimulatedOrphanDeletionRevivesTheOrphan(t *testing.T) {
	s := newSimulation(t, 1, correctProtocol)
	procs := s.settledGroup(3)
	require.Equal(t, "ghost lease", s.ghost())
	ghost := leases.MemberLeaseName(simGroup, "ghost-1")
	for _, p := range procs {
		p.lag = 3 * time.Second // a watch some seconds behind (not stale by the own-cache check)
	}
	for deadline := s.now.Add(20 * simLeaseDuration); s.now.Before(deadline) && s.store.Holder(ghost) != ""; {
		s.advance(simStep, false)
	}
	require.Empty(t, s.store.Holder(ghost), "the orphaned ghost lease was deleted")
	s.advance(simGracefulWindow, false)
	for _, p := range procs {
		assert.False(t, p.coordinator.observer.Live("ghost-1", p.clock.Now()), "%s counts the deleted orphan live", p.incarnation)
	}
}

func TestSimulatedMemberLeaseWrittenUnderTwoProcesses(t *testing.T) {
	for _, play := range []func(*simulation){
		(*simulation).memberLeaseDeletedUnderADuplicate,
		(*simulation).memberLeaseEditedUnderALoser,
	} {
		s := newSimulation(t, 1, correctProtocol)
		play(s)
		assert.NoError(t, s.failure)
	}
}

// memberLeaseDeletedUnderADuplicate boots a second process under a member's name; after a renewal
// the first is cut off from the store, and a second later a person deletes the member lease.
func (s *simulation) memberLeaseDeletedUnderADuplicate() {
	procs := s.settledGroup(3)
	old := procs[0]
	s.boot(old.name, s.groupConfig(), s.newPod(old.name))
	s.advance(5*time.Second, false)
	s.untilRenewed(old)
	s.cut(old, 20*time.Second)
	s.advance(time.Second, false)
	name := old.member.LeaseName()
	s.personWrites(name, func() error { return s.store.Delete(context.Background(), name, "") })
	s.advance(10*time.Second, false)
}

// memberLeaseEditedUnderALoser boots a second process under a member's name while the first is cut
// off, so that the second takes the lease over and the first, back, has lost the name; after a
// renewal the second is cut off, and a second later a person edits the lease's holder.
func (s *simulation) memberLeaseEditedUnderALoser() {
	procs := s.settledGroup(3)
	old := procs[0]
	s.cut(old, 25*time.Second)
	replacement := s.boot(old.name, s.groupConfig(), s.newPod(old.name))
	s.advance(35*time.Second, false)
	s.untilRenewed(replacement)
	s.cut(replacement, 20*time.Second)
	s.advance(time.Second, false)
	name := old.member.LeaseName()
	s.personWrites(name, func() error {
		l, err := s.store.Get(context.Background(), name)
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To("someone-else")
		_, err = s.store.Update(context.Background(), l)
		return err
	})
	s.advance(10*time.Second, false)
}

func TestSimulatedMemberLeaseDeletedUnderAStaleObserver(t *testing.T) {
	s := newSimulation(t, 1, correctProtocol)
	s.memberLeaseDeletedUnderAStaleObserver()
	require.NoError(t, s.failure)
}

// memberLeaseDeletedUnderAStaleObserver pauses member b for 20 s; 3 s before b resumes, member a
// renews, is cut off from the store, and a person deletes a's member lease.
func (s *simulation) memberLeaseDeletedUnderAStaleObserver() {
	procs := s.settledGroup(3)
	a, b := procs[0], procs[1]
	resume := s.now.Add(20 * time.Second)
	b.pausedUntil = resume
	s.advanceTo(resume.Add(-5 * time.Second))
	s.untilRenewed(a)
	s.cut(a, 20*time.Second)
	a.hanging = false
	name := a.member.LeaseName()
	s.personWrites(name, func() error { return s.store.Delete(context.Background(), name, "") })
	s.advanceTo(resume.Add(5 * time.Second))
}

func TestSimulatedNewProcessAfterItsMemberLeaseWasDeleted(t *testing.T) {
	for _, join := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			s := newSimulation(t, seed, correctProtocol)
			s.newProcessAfterItsMemberLeaseWasDeleted(join)
			require.NoError(t, s.failure, "seed %d, join %t", seed, join)
			// Once the old process is fenced for sure, the new one holds the share.
			s.advance(30*time.Second, false)
			s.checkLiveness("after the new process waited for its predecessor")
			require.NoError(t, s.failure, "seed %d, join %t", seed, join)
		}
	}
}

// newProcessAfterItsMemberLeaseWasDeleted cuts member a off from the store right after a renewal
// (and with join, a member joins, to which the ring moves some of a's share); a second later a person
// deletes a's member lease, and a second process starts under a's name.
func (s *simulation) newProcessAfterItsMemberLeaseWasDeleted(join bool) {
	procs := s.settledGroup(3)
	a := procs[0]
	s.untilRenewed(a)
	s.cut(a, 20*time.Second)
	if join {
		s.join()
	}
	s.advance(time.Second, false)
	name := a.member.LeaseName()
	s.personWrites(name, func() error { return s.store.Delete(context.Background(), name, "") })
	s.boot(a.name, s.groupConfig(), s.newPod(a.name))
	s.advance(10*time.Second, false)
}

// A partition lease deleted or cleared under a holder that may still act stays its (docs/sharding.md,
// "A partition lease gone from under its holder stays the holder's"): a joiner that the ring gives
// it, and that saw it held, waits until the holder has expired (cut off) or, its work stopped, marked
// the lease released (its watch lagging 20 s).
func TestSimulatedPartitionLeasesDeletedUnderTheirHolder(t *testing.T) {
	for _, lagging := range []bool{false, true} {
		for seed := uint64(1); seed <= 4; seed++ {
			s := newSimulation(t, seed, correctProtocol)
			s.partitionLeasesDeletedUnderTheirHolder(lagging)
			require.NoError(t, s.failure, "seed %d, lagging %t", seed, lagging)
			require.Positive(t, s.faults["vanished partitions taken by the joiner"], "seed %d, lagging %t: the joiner took none of them", seed, lagging)
		}
	}
}

// partitionLeasesDeletedUnderTheirHolder cuts member v off right after a renewal (it acts on until its
// fence), or with lagging lets v's watch fall 20 s behind; a member joins, and the ring gives it
// partitions v does not release yet; two seconds later, once the joiner has seen them held by v, a
// person deletes or clears every partition lease v holds. No overlap is excused.
func (s *simulation) partitionLeasesDeletedUnderTheirHolder(lagging bool) {
	s.strictDeletes = true
	procs := s.settledGroup(3)
	v := procs[1]
	s.untilRenewed(v)
	if lagging {
		v.lag = 20 * time.Second
	} else {
		s.cut(v, 40*time.Second)
	}
	s.join()
	joiner := s.procs[len(s.procs)-1]
	s.advance(2*time.Second, false)
	held := v.coordinator.Held()
	for i, p := range held {
		name := leases.PartitionLeaseName(simGroup, p)
		if i%2 == 0 {
			s.personWrites(name, func() error { return s.store.Delete(context.Background(), name, "") })
			continue
		}
		l, err := s.store.Get(context.Background(), name)
		require.NoError(s.t, err)
		l.Spec.HolderIdentity = nil
		s.personWrites(name, func() error { _, err := s.store.Update(context.Background(), l); return err })
	}
	s.advance(25*time.Second, false)
	v.lag = 0
	s.advance(25*time.Second, false)
	for _, p := range held {
		if joiner.coordinator.Holds(p) {
			s.faults["vanished partitions taken by the joiner"]++
		}
	}
}

// Three 12 s outages of the store for every member, 45 s apart (a seed API server's brownouts,
// docs/sharding.md, "Gray failures"): every member fences three times within the flap window, and
// none steps down, since none could hand its share to a member that does not fence; 5 s after the
// third heals, every partition is acted on by its owner.
func TestSimulatedBrownoutsDoNotBlindTheGroup(t *testing.T) {
	forSeeds(t, 4, (*simulation).brownouts)
}

// A member whose own link flaps while the others renew well does step down, and they hold its share.
func TestSimulatedAFlappingMemberStepsDown(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		s := newSimulation(t, seed, correctProtocol)
		procs := s.settledGroup(3)
		began := s.now
		s.cutThrice(procs[:1])
		require.NoError(t, s.failure, "seed %d", seed)
		require.True(t, s.steppedDownSince(began), "seed %d: %s fenced three times and stayed", seed, procs[0].incarnation)
		s.checkLiveness("after the step-down")
		require.NoError(t, s.failure, "seed %d", seed)
	}
}

// cutThrice cuts procs off from the store for 12 s, three times, 45 s apart, and runs on until 5 s
// after the third heal.
func (s *simulation) cutThrice(procs []*simProc) {
	for i := range 3 {
		for _, p := range procs {
			s.cut(p, 12*time.Second)
		}
		if i < 2 {
			s.advance(45*time.Second, false)
		}
	}
	s.advance(17*time.Second, false)
}

// brownouts cuts every member of a settled group off for 12 s, three times, 45 s apart, and checks
// liveness 5 s after the third heal.
func (s *simulation) brownouts() {
	procs := s.settledGroup(3)
	began := s.now
	s.cutThrice(procs)
	if s.steppedDownSince(began) {
		s.failLiveness("a member stepped down in a brownout of the whole group")
		return
	}
	s.checkLiveness("5 s after the third brownout")
}

// A member cut off twice on its own, and then once more with the whole group in a brownout, does not
// step down at that third fence: when it fenced, its view still showed the others renewing without
// fences, but that was before the brownout; the renewals it sees after the brownout show them fencing
// with it (the chaos suite found this: a cut and a pause of one replica, then brownouts), even when
// its watch lags behind its renewals.
func TestSimulatedABrownoutAfterAMembersOwnCutsStepsNoOneDown(t *testing.T) {
	forSeeds(t, 4, func(s *simulation) {
		procs := s.settledGroup(3)
		began := s.now
		for range 2 {
			s.cut(procs[0], 12*time.Second)
			s.advance(30*time.Second, false)
		}
		// Its watch lags: its first renewal after the brownout comes before its view shows the
		// others' renewals after it.
		procs[0].lag = 1500 * time.Millisecond
		for _, p := range procs {
			s.cut(p, 12*time.Second)
		}
		s.advance(17*time.Second, false)
		if s.steppedDownSince(began) {
			s.failLiveness("a member stepped down at a fence in a brownout of the whole group")
			return
		}
		s.checkLiveness("5 s after the brownout")
	})
}

func TestSimulatedFirstRenewalAfterFailuresRevivesNoExpiredMember(t *testing.T) {
	forSeeds(t, 8, (*simulation).firstRenewalAfterFailures)
}

// firstRenewalAfterFailures crashes a member of a settled group, lets the others take its share over,
// then starts a new member that cannot reach the store for its first 20 s: once it holds its lease it
// must not count the crashed member live. It had no renewal before its failures, so it has no outage
// to defer the others' expiry for; and the crashed member's lease, unchanged for two lease durations
// and named by no partition, is deleted before the new member could see it (leases.OrphanedAfter),
// which would make it count the member live for a lease duration from first sight.
func (s *simulation) firstRenewalAfterFailures() {
	procs := s.settledGroup(3)
	s.crash(procs[2])
	s.advance(simQuiet, false)
	s.lastFault = s.now
	s.join()
	joiner := s.procs[len(s.procs)-1]
	s.cut(joiner, 20*time.Second)
	joiner.hanging = false
	s.advance(20*time.Second+simGracefulWindow, false)
	if joiner.coordinator.observer.Live(procs[2].name, joiner.clock.Now()) {
		s.failLiveness("%s counts %s live, which crashed before it started", joiner.incarnation, procs[2].incarnation)
	}
}

// A member away on a returning leave attracts nothing new: a crash of another member right after the
// leave hands the crashed member's share to the members present, not to the one away, and the share
// reserved for it waits for it alone (docs/sharding.md, "Graceful stops").
func TestSimulatedAReturningMemberAttractsNothingWhileAway(t *testing.T) {
	forSeeds(t, 4, (*simulation).crashWhileAnotherIsAway)
}

// crashWhileAnotherIsAway stops a member of a settled group of three to restart, crashes another a
// second later, and checks a lease duration and a few seconds after the crash, while the first is
// still away, that the third acts on every partition not reserved for it; then again once it came
// back (the successor counts the crashed member live for a lease duration from first sight, by
// design, so it settles only then).
func (s *simulation) crashWhileAnotherIsAway() {
	procs := s.settledGroup(3)
	away, crashed, present := procs[0], procs[1], procs[2]
	owners := make([]string, simPartitions)
	for part := range owners {
		owners[part] = present.name
	}
	for _, part := range away.coordinator.Held() {
		owners[part] = ""
	}
	s.lastFault = s.now
	s.startLeave(away, simReturnGrace, false)
	s.returnAfter(away, simReturnGrace-500*time.Millisecond)
	s.advance(time.Second, false)
	for _, p := range []*simProc{crashed, present} {
		if !p.coordinator.Ready() {
			s.failLiveness("%s is unready while %s is away on a returning leave", p.incarnation, away.incarnation)
			return
		}
	}
	s.crash(crashed)
	s.advance(simLeaseDuration+simGracefulWindow, false)
	if s.actedOnBy(owners, "while "+away.incarnation+" is away and "+crashed.incarnation+" crashed") {
		s.advance(simReturnGrace-500*time.Millisecond-s.now.Sub(s.lastFault)+simGracefulWindow, false)
		s.waitOutRevivals()
		if !s.checkLiveness("after the return") && s.failure == nil {
			s.failLiveness("liveness after the return was not checked")
		}
	}
}

// A member that stopped to restart and will not be back (a scale-down decided after its stop, or a
// new Pod that cannot start) has its reserved share taken over at once, not at the end of its grace
// (docs/sharding.md, "Graceful stops").
func TestSimulatedAMemberThatWillNotReturnIsNotWaitedFor(t *testing.T) {
	forSeeds(t, 4, (*simulation).awayForGood)
}

// awayForGood stops a member of a settled group of three to restart, with a return grace far longer
// than a lease duration, and never boots its successor; the others learn that it will not return and
// must act on every partition a few seconds later.
func (s *simulation) awayForGood() {
	procs := s.settledGroup(3)
	away := procs[0]
	for _, p := range procs[1:] {
		p.coordinator.cfg.WontReturn = func(_ context.Context, m string) (bool, error) { return m == away.name, nil }
	}
	s.lastFault = s.now
	s.startLeave(away, 10*simLeaseDuration, false)
	s.advance(simGracefulWindow+returnCheckEvery, false)
	s.actedOnBy(procs[1].coordinator.rings.owners, "while "+away.incarnation+" is away for good")
}

// A rolling update that drops a role stops each pod as a restart: the old process leaves the dropped
// role's group returning, and its next process, which does not run the role, ends that leave
// (leases.ForgoReturn); the others must act on every partition a few seconds later, long before the
// return grace (docs/sharding.md, "A group per role").
func TestSimulatedARoleDroppedInARollingUpdateIsADeparture(t *testing.T) {
	forSeeds(t, 4, (*simulation).roleDropped)
}

// roleDropped stops a member of a settled group of three to restart with a return grace far longer
// than a lease duration; once it has left, its successor (a process of the other role only) ends the
// returning leave, and the other two must act on every partition a few seconds later.
func (s *simulation) roleDropped() {
	procs := s.settledGroup(3)
	away := procs[0]
	s.lastFault = s.now
	s.startLeave(away, 10*simLeaseDuration, false)
	for range 100 {
		if away.phase == procGone {
			break
		}
		s.advance(100*time.Millisecond, false)
	}
	if away.phase != procGone {
		s.failLiveness("%s did not leave", away.incarnation)
		return
	}
	wrote, err := leases.ForgoReturn(context.Background(), s.store, simGroup, away.name)
	if err != nil || !wrote {
		s.failLiveness("the successor of %s could not end its returning leave: wrote %v, %v", away.incarnation, wrote, err)
		return
	}
	s.advance(simGracefulWindow, false)
	s.checkLiveness("after the successor of " + away.incarnation + " ended its returning leave")
}

// A settings change rolled out as a rolling update, which the protocol does not support (a group
// needs a scale to 0 and back): the incumbents win. The restarted member's successor, whose settings
// differ, must not join, and the two incumbents must act on every partition once the return grace of
// its predecessor has passed (docs/sharding.md, "A setting changed by a rolling update anyway: the incumbents win").
func TestSimulatedASettingsChangeRolledOutLeavesTheIncumbentsActing(t *testing.T) {
	forSeeds(t, 4, (*simulation).settingsRolledOut)
}

// settingsRolledOut restarts a member of a settled group of three with another load bound, and checks
// a few seconds after its return grace that the successor holds no member lease and that the two
// incumbents act on every partition by the ring of the two.
func (s *simulation) settingsRolledOut() {
	procs := s.settledGroup(3)
	restarted, incumbents := procs[0], procs[1:]
	s.lastFault = s.now
	cfg := s.groupConfig()
	cfg.skew, cfg.ring.LoadBound = "load bound", 1.25
	cfg.settings = Settings(cfg.ring, []string{"prober", "weeder"})
	s.startLeave(restarted, simReturnGrace, false)
	s.returns = append(s.returns, simReturn{at: s.now.Add(time.Second), name: restarted.name, cfg: cfg})
	s.advance(simReturnGrace+simGracefulWindow, false)
	successors := s.procsOf(restarted.name)
	if len(successors) != 1 || successors[0] == restarted {
		s.failLiveness("the successor of %s did not boot", restarted.incarnation)
		return
	}
	if !successors[0].member.Fenced(successors[0].clock.Now()) {
		s.failLiveness("%s, whose settings differ from the incumbents', took its member lease", successors[0].incarnation)
		return
	}
	ring, err := NewRing([]string{incumbents[0].name, incumbents[1].name}, incumbents[0].cfg.ring)
	if err != nil {
		s.failLiveness("ring: %v", err)
		return
	}
	s.ownersAct(ring, "after the return grace of "+restarted.incarnation+", its successor with other settings kept out")
}

// forSeeds plays scenario on the correct protocol with the seeds 1 to n, and fails on the first
// seed whose run failed.
func forSeeds(t *testing.T, n uint64, scenario func(*simulation)) {
	t.Helper()
	for seed := uint64(1); seed <= n; seed++ {
		s := newSimulation(t, seed, correctProtocol)
		scenario(s)
		require.NoError(t, s.failure, "seed %d", seed)
	}
}
