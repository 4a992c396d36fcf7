package prober

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestJudgeLease(t *testing.T) {
	const grace = 40 * time.Second // by age: 30 s; stability window of a 40 s lease: 15 s
	now := decisionNow
	old := nodeLease("n", now.Add(-time.Minute))
	young := nodeLease("n", now.Add(-5*time.Second))
	seenFor := func(l coordinationv1.Lease, d time.Duration) *Sighting {
		return &Sighting{RenewTime: l.Spec.RenewTime.Time, Since: now.Add(-d)}
	}
	short := nodeLease("n", now.Add(-time.Minute))
	short.Spec.LeaseDurationSeconds = ptr.To[int32](4) // renews every second: window 1.5 s
	tests := []struct {
		name  string
		lease coordinationv1.Lease
		prev  *Sighting
		want  LeaseState
	}{
		{"old, first sight (after a start or a takeover)", old, nil, Unknown},
		{"young, first sight", young, nil, Fresh},
		{"old, but advanced since the last read", old, &Sighting{RenewTime: now.Add(-2 * time.Minute), Since: now.Add(-time.Hour)}, Fresh},
		{"older than seen before (a stale answer)", old, &Sighting{RenewTime: now, Since: now.Add(-time.Hour)}, Regressed},
		{"advanced less than the window ago, unchanged since", old, &Sighting{RenewTime: old.Spec.RenewTime.Time, Since: now.Add(-10 * time.Second), Renewed: true}, Fresh},
		{"old, seen unchanged for less than the window", old, seenFor(old, 14*time.Second), Unknown},
		{"old, seen unchanged for the window", old, seenFor(old, 15*time.Second), Expired},
		{"young, seen unchanged for the window", young, seenFor(young, 20*time.Second), Fresh},
		{"young by age (node clock ahead), unchanged for 0.75 × grace", young, seenFor(young, 30*time.Second), Expired},
		{"a short lease's window is shorter", short, seenFor(short, 1500*time.Millisecond), Expired},
		{"no renewTime", coordinationv1.Lease{}, nil, Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := JudgeLease(&tt.lease, tt.prev, readAt(now, tt.lease), grace)
			assert.Equal(t, tt.want, got)
		})
	}
	untrusted := []struct {
		name  string
		lease coordinationv1.Lease
		prev  *Sighting
		want  LeaseState
	}{
		{"young by a clock not trusted, first sight", young, nil, Unknown},
		{"old by a clock not trusted, seen for the window", old, seenFor(old, 15*time.Second), Unknown},
		{"seen unchanged for 0.75 × grace", old, seenFor(old, 30*time.Second), Expired},
		{"advanced since the last read", young, &Sighting{RenewTime: now.Add(-time.Hour)}, Fresh},
		{"advanced, unchanged for less than the window", young, &Sighting{RenewTime: young.Spec.RenewTime.Time, Since: now.Add(-5 * time.Second), Renewed: true}, Fresh},
	}
	for _, tt := range untrusted {
		t.Run("untrusted clocks: "+tt.name, func(t *testing.T) {
			read := readAt(now, tt.lease)
			read.TrustAge = false
			got, _ := JudgeLease(&tt.lease, tt.prev, read, grace)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestServerClockAgrees(t *testing.T) {
	read := LeaseRead{Sent: decisionNow, Received: decisionNow.Add(2 * time.Second)}
	for _, tt := range []struct {
		date time.Time
		want bool
	}{
		{time.Time{}, false},
		{decisionNow.Add(time.Second), true},
		{decisionNow.Add(8 * time.Second), true}, // 7 s after the middle: 5 s, the Date's second and half the request
		{decisionNow.Add(9 * time.Second), false},
		{decisionNow.Add(-6 * time.Second), true},
		{decisionNow.Add(-time.Minute), false},
	} {
		assert.Equal(t, tt.want, ServerClockAgrees(read, tt.date), "%s", tt.date.Sub(decisionNow))
	}
}

func TestNodeClocksBehind(t *testing.T) {
	prevSent := decisionNow.Add(-10 * time.Second)
	seen := map[string]Sighting{"a": {RenewTime: decisionNow.Add(-time.Hour)}}
	read := func(renewed time.Time) LeaseRead { return readAt(decisionNow, nodeLease("a", renewed)) }
	behind, known := NodeClocksBehind(read(decisionNow.Add(-5*time.Second)), prevSent, seen)
	assert.True(t, known)
	assert.False(t, behind, "renewed 5 s after the previous read: no clock behind")
	behind, known = NodeClocksBehind(read(decisionNow.Add(-16*time.Second)), prevSent, seen)
	assert.True(t, known)
	assert.True(t, behind, "renewed, by its clock, 6 s before the previous read that did not show it")
	_, known = NodeClocksBehind(read(decisionNow.Add(-time.Hour)), prevSent, seen)
	assert.False(t, known, "no lease advanced")
	_, known = NodeClocksBehind(read(decisionNow), time.Time{}, seen)
	assert.False(t, known, "no previous read")
}

func TestStableWindow(t *testing.T) {
	assert.Equal(t, 15*time.Second, StableWindow(&coordinationv1.Lease{}))
	l := coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](120)}}
	assert.Equal(t, 45*time.Second, StableWindow(&l))
}

// lies is how the clocks and the answers of a simulated shoot are off.
type lies struct {
	replicaClock time.Duration // added to the replica's Sent and Received
	nodeClock    time.Duration // added to every renewTime the kubelets write
	bodyDelay    time.Duration // between serving a list and the replica receiving it
	gap          time.Duration // every 5 minutes, all kubelets miss their renewals for this long
}

// probeSeries reads the leases of a shoot whose 10 kubelets renew every 10 s (each on its own phase)
// until they all stop at stop (zero: never), every interval ± 10 %, for span, and returns the true
// times (since start) of the reads that decided ScaleDown.
func probeSeries(t *testing.T, l lies, interval, span, stop time.Duration) []time.Duration {
	const grace, renew = 40 * time.Second, 10 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	start := decisionNow
	names := make([]string, 10)
	phases := make([]time.Duration, 10)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
		phases[i] = time.Duration(rng.Int64N(int64(renew)))
	}
	// renewTime of kubelet i as served at true time at.
	renewTime := func(i int, at time.Duration) time.Time {
		if stop > 0 && at > stop {
			at = stop
		}
		if l.gap > 0 && at%(5*time.Minute) < l.gap {
			at -= at % (5 * time.Minute) // the renewals of the gap are missed
		}
		last := (at-phases[i])/renew*renew + phases[i]
		return start.Add(last + l.nodeClock)
	}
	var downs []time.Duration
	var prevSent time.Time
	var nodesBehind, nodesKnown bool
	seen := map[string]Sighting{}
	for at := time.Minute; at < span; at += time.Duration(float64(interval) * (0.9 + 0.2*rng.Float64())) {
		leases := make([]coordinationv1.Lease, len(names))
		for i, n := range names {
			leases[i] = nodeLease(n, renewTime(i, at))
		}
		read := LeaseRead{Leases: leases, Sent: start.Add(at + l.replicaClock), Received: start.Add(at + l.bodyDelay + l.replicaClock)}
		serverDate := start.Add(at).Truncate(time.Second) // the shoot API server's clock is right
		if behind, known := NodeClocksBehind(read, prevSent, seen); known {
			nodesBehind, nodesKnown = behind, true
		}
		read.TrustAge = ServerClockAgrees(read, serverDate) && nodesKnown && !nodesBehind
		prevSent = read.Sent
		var d Decision
		d, seen = DecideScaling(names, read, seen, grace, 0.6)
		if d.Action == ScaleDown {
			downs = append(downs, at)
		}
	}
	return downs
}

// A healthy shoot is never judged expired, whatever the clocks of the replica and the nodes say and
// however late its answers arrive.
func TestHealthyShootUnderLyingClocksAndSlowAnswers(t *testing.T) {
	for _, l := range []lies{
		{},
		{replicaClock: time.Minute}, {replicaClock: -time.Minute},
		{nodeClock: -90 * time.Second}, {nodeClock: 90 * time.Second},
		{bodyDelay: 28 * time.Second},
		{replicaClock: 10 * time.Minute, nodeClock: -10 * time.Minute, bodyDelay: 20 * time.Second},
		// A shoot kube-apiserver restart: every kubelet misses its renewals for 25 s, less than 0.75 ×
		// grace; a replica with the right clock does nothing, and one whose clock is off must not either.
		{gap: 25 * time.Second},
		{gap: 25 * time.Second, replicaClock: time.Minute},
		{gap: 25 * time.Second, nodeClock: -90 * time.Second},
		{gap: 25 * time.Second, nodeClock: -20 * time.Second},
	} {
		for _, interval := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second} {
			t.Run(fmt.Sprintf("%+v every %s", l, interval), func(t *testing.T) {
				assert.Empty(t, probeSeries(t, l, interval, time.Hour, 0))
			})
		}
	}
}

// A real meltdown is seen as soon as the original's age rule would see it (the first read at least
// 0.75 × grace after the last renewal, plus one read), and still seen, later, when the node clocks run
// ahead and the age rule never fires.
func TestMeltdownIsSeenDespiteObservation(t *testing.T) {
	const stop = 10 * time.Minute
	for _, tt := range []struct {
		l        lies
		interval time.Duration
		within   time.Duration // from the last renewal to the first ScaleDown
	}{
		{lies{}, 10 * time.Second, 30*time.Second + 10*time.Second + 11*time.Second},
		{lies{}, 30 * time.Second, 30*time.Second + 10*time.Second + 33*time.Second},
		{lies{replicaClock: time.Minute}, 10 * time.Second, 30*time.Second + 10*time.Second + 2*11*time.Second},
		{lies{replicaClock: -time.Minute}, 10 * time.Second, 30*time.Second + 10*time.Second + 2*11*time.Second},
		{lies{nodeClock: 90 * time.Second}, 10 * time.Second, 30*time.Second + 10*time.Second + 2*11*time.Second},
	} {
		t.Run(fmt.Sprintf("%+v every %s", tt.l, tt.interval), func(t *testing.T) {
			downs := probeSeries(t, tt.l, tt.interval, stop+5*time.Minute, stop)
			require.NotEmpty(t, downs)
			assert.Greater(t, downs[0], stop+30*time.Second-10*time.Second, "not before 0.75 × grace after the last renewals")
			assert.LessOrEqual(t, downs[0], stop+tt.within)
		})
	}
}

func TestALeaseCreatedAnewIsANewLease(t *testing.T) {
	lease := nodeLease("n0", decisionNow.Add(-time.Hour))
	lease.UID = "new"
	seen := map[string]Sighting{"n0": {UID: "old", RenewTime: decisionNow, Since: decisionNow.Add(-time.Minute)}}
	d, kept := DecideScaling([]string{"n0", "n1"}, readAt(decisionNow, lease, nodeLease("n1", decisionNow)), seen, 40*time.Second, 0.5)
	assert.Zero(t, d.Regressed, "an older renewTime on another lease of the name is no regression")
	assert.Equal(t, 1, d.Unknown, "a first sight of an old lease")
	assert.Equal(t, types.UID("new"), kept["n0"].UID)
}
