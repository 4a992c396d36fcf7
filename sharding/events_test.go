package sharding

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

const info = `"level"=0`

func TestOneRebalancedLinePerChangeAndPerPartitionLinesAtDebug(t *testing.T) {
	g := newSafetyGroup(t, "rebalance-log", 31)
	logs0, logs1 := &logtest.Lines{}, &logtest.Lines{}
	a := g.start("dwd-0", safetyOptions{log: logs0.Logger(1)})
	g.runUntil(time.Minute, g.converged("dwd-0"), "dwd-0 holds every partition")
	g.runFor(3 * safetyLease)
	lines := logs0.With(`"msg"="Rebalanced"`)
	require.Len(t, lines, 1, "one line for the start, none for the reconciles without a change: %v", lines)
	for _, kv := range []string{info, `"group"="rebalance-log"`, `"members"=["dwd-0"]`, `"membersChanged"=true`,
		`"heldBefore"=0`, `"heldAfter"=31`, `"acquired"=31`, `"takenOver"=0`, `"handedOver"=0`, `"released"=0`, `"took"=`} {
		assert.Contains(t, lines[0], kv)
	}

	b := g.start("dwd-1", safetyOptions{log: logs1.Logger(1)})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "dwd-1 takes its share")
	g.runFor(3 * safetyLease)
	moved := len(g.ringOf("dwd-0", "dwd-1")["dwd-1"])
	lines = logs0.With(`"msg"="Rebalanced"`)
	require.Len(t, lines, 2, "one more line on dwd-0 for the join: %v", lines)
	for _, kv := range []string{info, `"members"=["dwd-0" "dwd-1"]`, `"heldBefore"=31`, `"acquired"=0`, `"released"=` + strconv.Itoa(moved)} {
		assert.Contains(t, lines[1], kv)
	}
	lines = logs1.With(`"msg"="Rebalanced"`)
	require.Len(t, lines, 1, "one line on dwd-1, however many reconciles it took to get its share: %v", lines)
	for _, kv := range []string{info, `"heldBefore"=0`, `"heldAfter"=` + strconv.Itoa(moved), `"acquired"=` + strconv.Itoa(moved),
		`"handedOver"=` + strconv.Itoa(moved), `"takenOver"=0`} {
		assert.Contains(t, lines[0], kv)
	}
	released := logs0.With(`"msg"="Released partition"`)
	assert.Len(t, released, moved, "a line per partition released")
	for _, l := range released {
		assert.Contains(t, l, `"level"=1`, "per-partition lines are debug lines")
	}
	assert.Len(t, logs0.With(`"msg"="Live members changed"`, `"level"=1`), 2)
	assert.Empty(t, a.eventsRecorded(), "a join is no Event")
	assert.Empty(t, b.eventsRecorded())
}

func TestTakeoverAfterACrashIsOneEventNamingTheCrashedMember(t *testing.T) {
	g := newSafetyGroup(t, "takeover-event", 31)
	logs := &logtest.Lines{}
	a := g.start("dwd-0", safetyOptions{log: logs.Logger(1)})
	b := g.start("dwd-1", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "two members converge")
	g.runFor(time.Second)
	crashed := len(g.ringOf("dwd-0", "dwd-1")["dwd-1"])
	before := len(logs.With(`"msg"="Rebalanced"`))

	g.crash(b)
	g.runUntil(2*safetyLease, g.converged("dwd-0"), "dwd-0 takes the crashed member's partitions")
	g.runFor(3 * safetyLease)

	assert.Equal(t, []string{corev1.EventTypeWarning + "/TookOverAfterCrash"}, a.eventsRecorded(), "one Event, not one per partition")
	assert.Equal(t, corev1.EventTypeWarning+"/TookOverAfterCrash/"+ActionTakeOver+": Took over "+strconv.Itoa(crashed)+
		" partitions whose holders' member leases expired without a graceful leave: dwd-1 ("+strconv.Itoa(crashed)+")", a.eventNotes()[0])
	lines := logs.With(`"msg"="Rebalanced"`)
	require.Len(t, lines, before+1, "one line for the takeover: %v", lines)
	for _, kv := range []string{info, `"members"=["dwd-0"]`, `"acquired"=` + strconv.Itoa(crashed), `"takenOver"=` + strconv.Itoa(crashed),
		`"handedOver"=0`, `"crashed"=["dwd-1"]`, `"heldAfter"=31`} {
		assert.Contains(t, lines[before], kv)
	}
}

func TestGracefulHandoverIsNoTakeoverEvent(t *testing.T) {
	g := newSafetyGroup(t, "handover-event", 31)
	a := g.start("dwd-0", safetyOptions{})
	b := g.start("dwd-1", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-1"), "two members converge")

	g.leave(b, 0)
	g.runUntil(2*safetyLease, g.converged("dwd-0"), "dwd-0 takes the share of the member that left")
	assert.Empty(t, a.eventsRecorded())
}

func TestSettingsMismatchEventsOnlyWhenItBeginsAndEnds(t *testing.T) {
	g := newSafetyGroup(t, "mismatch-events", 31)
	a := g.start("dwd-0", safetyOptions{})
	g.start("dwd-3", safetyOptions{})
	g.runUntil(time.Minute, g.converged("dwd-0", "dwd-3"), "the incumbents hold every partition")

	skewed := g.ring
	skewed.LoadBound = 1.10
	b := g.start("dwd-1", safetyOptions{ring: &skewed})
	g.runFor(safetyLease)
	g.leave(a, 0)
	g.runFor(safetyLease)
	assert.Equal(t, []string{corev1.EventTypeWarning + "/SettingsMismatch"}, b.eventsRecorded(),
		"another member disagreeing changes who disagrees, not whether: no second Event")
	g.runFor(safetyLease)
	assert.Len(t, b.eventsRecorded(), 1, "nothing more while it lasts")
}

func TestFenceIsAWarningEventOnTheMember(t *testing.T) {
	settings := config.Sharding{GroupName: "fence-event", MemberName: "m",
		MemberLeaseDuration: safetyLease, MemberRenewDeadline: safetyRenew, MemberRetryPeriod: safetyRetry}
	clk := clocktesting.NewFakeClock(safetyT0)
	store := leasestest.NewStore()
	c := NewCoordinator(Config{Group: settings.GroupName, Member: "m", Incarnation: "i",
		Ring: safetyRing(7), LeaseDuration: safetyLease, RetryPeriod: safetyRetry, WriteConcurrency: 1,
		Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clk, Log: logr.Discard()})
	_, err := c.Reconcile(context.Background())
	require.NoError(t, err)
	require.Len(t, c.Held(), 7)
	var events []string
	r := &Runner{settings: settings, log: logr.Discard(), clock: clk, coordinator: c,
		member: &leases.Member{Group: settings.GroupName, Name: "m"}, opts: RunnerOptions{
			Exit: func(int) { t.Error("a quick fence exits nothing") },
			Event: func(eventType, reason, action, message string) {
				events = append(events, eventType+"/"+reason+"/"+action+": "+message)
			}}}

	r.onFence()
	assert.Empty(t, c.Held())
	assert.Equal(t, []string{corev1.EventTypeWarning + "/Fenced/" + ActionFence + ": Member lease " + leases.MemberLeaseName("fence-event", "m") +
		" was not renewed within the renew deadline (10s): stopping the work of the 7 partitions it holds; they resume once a renewal succeeds"}, events)
}

func TestRebalanceTalliesAChangeUntilItSettles(t *testing.T) {
	var r rebalance
	r.beginIfTouched(safetyT0, 5)
	_, ok := r.end(safetyT0, true)
	require.False(t, ok, "nothing changed: nothing to summarise")

	r.membersChanged()
	r.releasedOne()
	r.beginIfTouched(safetyT0, 5)
	_, ok = r.end(safetyT0.Add(time.Second), false)
	require.False(t, ok, "not settled yet")

	r.acquiredOne(Handover, "")
	r.acquiredOne(Crash, "dwd-2")
	r.acquiredOne(Crash, "dwd-2")
	r.acquiredOne(Resume, "")
	r.acquiredOne(Fresh, "")
	r.beginIfTouched(safetyT0.Add(time.Second), 4)
	s, ok := r.end(safetyT0.Add(3*time.Second), true)
	require.True(t, ok)
	assert.Equal(t, rebalanceSummary{took: 3 * time.Second, heldBefore: 5, acquired: 5, handedOver: 1, resumed: 1, released: 1,
		membersChanged: true, crashed: map[string]int{"dwd-2": 2}}, s, "from the first step of the change to the one that settled it")
	assert.Equal(t, 2, s.takenOver())

	_, ok = r.end(safetyT0.Add(5*time.Second), true)
	assert.False(t, ok, "summarised once")
}
