package prober

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// partitionOwnership puts each namespace in one of 4 partitions and owns them all.
type partitionOwnership struct{}

func (partitionOwnership) Owns(string) bool { return true }

func (partitionOwnership) Partition(ns string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ns))
	return int(h.Sum32() % 4)
}

func (partitionOwnership) Guard(ctx context.Context, _ string) (context.Context, context.CancelFunc, error) {
	return ctx, func() {}, nil
}

func TestReleasedShootsAreProbedLongestUnprobedFirstByTheNextHolder(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	own := partitionOwnership{}
	var shoots []string
	for _, ns := range []string{"shoot--a--1", "shoot--a--2", "shoot--a--3", "shoot--a--4", "shoot--a--5", "shoot--a--6", "shoot--a--7"} {
		if own.Partition(ns) == own.Partition("shoot--a--1") {
			shoots = append(shoots, ns)
		}
	}
	require.GreaterOrEqual(t, len(shoots), 2, "the test needs two shoots in one partition")
	p := own.Partition(shoots[0])

	// The releasing replica: shoot i was last probed i+1 seconds before the release.
	old := &Manager{Ownership: own, Clock: clk, Log: testr.New(t)}
	old.mu.Lock()
	for i, ns := range shoots {
		old.keepAgeLocked(p, ns, &shootProbe{st: &probeState{lastRun: now.Add(-time.Duration(i+1) * time.Second)}})
	}
	old.mu.Unlock()
	key, state := old.HandoverState(p)
	require.Equal(t, HandoverKey, key)
	var ages map[string]int64
	require.NoError(t, json.Unmarshal([]byte(state), &ages))
	assert.Len(t, ages, len(shoots))
	_, again := old.HandoverState(p)
	assert.Empty(t, again, "handed over once")

	// The next holder, its clock an hour off: only the ages count.
	next := &Manager{Ownership: own, Clock: clocktesting.NewFakeClock(now.Add(time.Hour)), Log: testr.New(t)}
	next.takeOverdue(p, state)
	first := map[string]time.Time{}
	for _, ns := range shoots {
		due, ok := next.overdue[ns]
		require.True(t, ok, ns)
		first[ns] = overdueRun(next.Clock.Now(), due)
	}
	order := slices.SortedFunc(slices.Values(shoots), func(a, b string) int { return first[a].Compare(first[b]) })
	want := slices.Clone(shoots)
	slices.Reverse(want)
	assert.Equal(t, want, order, "the longest unprobed runs first")
	for _, ns := range shoots {
		assert.WithinDuration(t, next.Clock.Now(), first[ns], 20*time.Millisecond, "at once, not counted as probe lag")
	}
	next.dropHanded(p)
	assert.Empty(t, next.overdue)
}

func TestResumeAfterAFenceUsesTheAgesKeptHere(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m := &Manager{Ownership: partitionOwnership{}, Clock: clocktesting.NewFakeClock(now), Log: testr.New(t)}
	p := m.Ownership.Partition("shoot--a--1")
	m.mu.Lock()
	m.keepAgeLocked(p, "shoot--a--1", &shootProbe{st: &probeState{lastRun: now.Add(-7 * time.Second)}})
	m.mu.Unlock()
	m.takeOverdue(p, "")
	assert.Equal(t, 7*time.Second, m.overdue["shoot--a--1"])
	assert.Empty(t, m.released, "kept ages are used once")
	m.takeOverdue(p, "not json")
	assert.Equal(t, 7*time.Second, m.overdue["shoot--a--1"], "unreadable state is ignored")
}

// Before an announced leave stops the work of some partitions, the probes of their shoots due from
// aheadMargin before the stop to the window after it are done first, by aheadMargin before the stop;
// the other partitions' shoots, and those due later, keep their times.
func TestTheProbesDueAroundALeaveAreRunAheadOfIt(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	own := partitionOwnership{}
	m := &Manager{Ownership: own, Clock: clk, Log: testr.New(t), Scheduler: NewScheduler(clk, 0, nil)}
	stop, window := now.Add(5*time.Second), 4*time.Second
	// Shoots of the handed partition, due before the margin, in it, in the window and after it; the
	// same times for shoots of another partition.
	due := []time.Duration{3 * time.Second, 4500 * time.Millisecond, 6 * time.Second, 8900 * time.Millisecond, 10 * time.Second}
	handed, kept := shootsOf(own, 0, len(due)), shootsOf(own, 1, len(due))
	job := func(context.Context) time.Duration { return Done }
	m.mu.Lock()
	for i, d := range due {
		for _, ns := range []string{handed[i], kept[i]} {
			m.indexLocked(ns)
			m.Scheduler.Schedule(ns, now.Add(d), job)
			m.Scheduler.tasks[ns].ran = true // a probe that has run: one that has not keeps its time
		}
	}
	m.mu.Unlock()
	m.RunAhead([]int{0}, stop, window)
	next := func(ns string) time.Time {
		m.Scheduler.mu.Lock()
		defer m.Scheduler.mu.Unlock()
		return m.Scheduler.tasks[ns].next
	}
	for i, d := range due {
		assert.Equal(t, now.Add(d), next(kept[i]), "another partition's shoot due at +%s", d)
	}
	assert.Equal(t, now.Add(3*time.Second), next(handed[0]), "due before the margin")
	assert.Equal(t, now.Add(10*time.Second), next(handed[4]), "due after the window")
	for i := 1; i <= 3; i++ {
		assert.WithinRange(t, next(handed[i]), now, stop.Add(-aheadMargin), "due at +%s", due[i])
	}
	assert.True(t, next(handed[1]).Before(next(handed[2])) && next(handed[2]).Before(next(handed[3])), "in their order")
}

// shootsOf returns n namespaces of partition p.
func shootsOf(own partitionOwnership, p, n int) []string {
	var shoots []string
	for i := 0; len(shoots) < n; i++ {
		if ns := "shoot--a--" + strconv.Itoa(i); own.Partition(ns) == p {
			shoots = append(shoots, ns)
		}
	}
	return shoots
}

// A meltdown in progress when its partition is handed over is found by the next holder's first probe:
// the sightings travel with the partition, and a lease judged expired stays expired while it does not
// change. Without them, the first probe sees every lease for the first time and decides nothing.
func TestAHandoverCarriesAMeltdownInProgress(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.m.Ownership = partitionOwnership{}
	p := f.m.Ownership.Partition(cycleNS)
	f.cycles(t, 3, 10*time.Second)
	// The kubelets stop; the first read after that comes 25 s later (a 30 s interval), so the expiry is
	// proven by the leases' age, not by 30 s of observation.
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	f.clk.Step(25 * time.Second)
	results := f.cycles(t, 8, 2*time.Second)
	_, started := f.flowStarted()
	require.True(t, started, "%v", results)

	// The release: the probe and its flow stop; its sightings go into the partition lease.
	f.m.mu.Lock()
	f.m.keepSightingsLocked(p, cycleNS, f.p)
	f.m.mu.Unlock()
	f.m.stopFlow(cycleNS)
	f.m.forgetVerdict(cycleNS)
	key, state := sightingsHandler{f.m}.HandoverState(p)
	require.Equal(t, SightingsKey, key)
	require.NotEmpty(t, state)
	f.clk.Step(2 * time.Second) // the handover's gap

	t.Run("without the sightings the first probe decides nothing", func(t *testing.T) {
		fresh := &shootProbe{m: f.m, namespace: cycleNS, spec: f.p.spec, st: &probeState{}}
		result, _ := fresh.cycle(context.Background())
		assert.Equal(t, resultNoDecision, result)
		f.m.stopFlow(cycleNS)
	})
	f.m.takeSightings(p, state)
	handed := f.m.handedSeen[cycleNS]
	assert.WithinDuration(t, f.p.st.lastSent.Add(2*time.Second), handed.sent, time.Millisecond, "the last read's send time, as an age (the gap makes it look later)")
	next := &shootProbe{m: f.m, namespace: cycleNS, spec: f.p.spec, st: &probeState{seen: handed.seen, lastSent: handed.sent}}
	result, _ := next.cycle(context.Background())
	assert.Equal(t, resultScaledDown, result, "the first probe of the next holder goes on with the scale-down")
	dir, ok := f.flowStarted()
	require.True(t, ok)
	assert.Equal(t, scaler.Down, dir)
}

func TestSightingsAtKeepAgesNotClocks(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	handed := map[string]handedSighting{
		"a": {UID: "u", Renew: now.Add(-time.Minute).UnixMilli(), Ago: 20000, Renewed: true, Expired: true},
		"b": {Renew: now.UnixMilli(), Ago: -5},
	}
	seen := sightingsAt(handed, now.Add(time.Hour))
	assert.Equal(t, map[string]Sighting{"a": {UID: "u", RenewTime: now.Add(-time.Minute), Since: now.Add(time.Hour - 20*time.Second), Renewed: true, Expired: true}}, seen,
		"Since is an age on the next holder's clock; a sighting from the future is dropped")
}

// A meltdown that begins around a graceful handover, after the releaser's last read, is found by the
// next holder within the rule's time (0.75 × grace plus the band) and the handover's gap: without the
// sightings it would take 30 s of the next holder's own observation. (The send time of the last read,
// handed over too, lets the first read check the kubelets' clocks; this scenario does not need it.)
func TestAMeltdownAroundAHandoverIsFoundInTheRulesTime(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.m.Ownership = partitionOwnership{}
	p := f.m.Ownership.Partition(cycleNS)
	f.cycles(t, 3, 10*time.Second)
	last := f.clk.Now().Add(-10 * time.Second) // the last read
	f.clk.Step(-9 * time.Second)
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() }) // 1 s after the last read
	f.clk.Step(7 * time.Second)                                   // the release, 8 s after it
	f.m.mu.Lock()
	f.m.keepSightingsLocked(p, cycleNS, f.p)
	f.m.mu.Unlock()
	_, state := sightingsHandler{f.m}.HandoverState(p)
	f.clk.Step(2 * time.Second) // the handover's gap
	f.m.takeSightings(p, state)
	handed := f.m.handedSeen[cycleNS]
	require.False(t, handed.sent.IsZero())
	f.p = &shootProbe{m: f.m, namespace: cycleNS, spec: f.p.spec, st: &probeState{seen: handed.seen, lastSent: handed.sent}}
	var results []string
	for range 30 { // cycles when the probe would run them: every 10 s, or at RecheckAt
		result, _ := f.p.cycle(context.Background())
		if results = append(results, result); result == resultScaledDown {
			break
		}
		wait, _ := nextRun(10*time.Second, f.clk.Now(), f.p.st.recheckAt)
		f.clk.Step(wait)
	}
	assert.LessOrEqual(t, f.clk.Since(last), time.Second+30*time.Second+maxClockOffset+2*time.Second, "%v", results)
}
