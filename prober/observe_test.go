package prober

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
		{"advanced less than the window ago, unchanged since", young, &Sighting{RenewTime: young.Spec.RenewTime.Time, Since: now.Add(-10 * time.Second), Renewed: true}, Fresh},
		{"old by a trusted age, seen twice: unrenewed since renewTime", old, seenFor(old, 14*time.Second), Expired},
		{"old, seen unchanged for the window", old, seenFor(old, 15*time.Second), Expired},
		{"29 s old when sent, 8 s late, seen 20 s: the age is the send time's", nodeLease("n", now.Add(-29*time.Second)),
			&Sighting{RenewTime: now.Add(-29 * time.Second), Since: now.Add(-20 * time.Second)}, Fresh},
		{"34 s old, but inside the band of clock error", nodeLease("n", now.Add(-34*time.Second)),
			&Sighting{RenewTime: now.Add(-34 * time.Second), Since: now.Add(-20 * time.Second)}, Unknown},
		{"young, seen unchanged for the window", young, seenFor(young, 20*time.Second), Fresh},
		{"young by age (node clock ahead), unchanged for 0.75 × grace", young, seenFor(young, 30*time.Second), Expired},
		{"a short lease's window is shorter", short, seenFor(short, 1500*time.Millisecond), Expired},
		{"no renewTime", coordinationv1.Lease{}, nil, Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := readAt(now, tt.lease)
			read.Received = now.Add(8 * time.Second) // late answers: the age is measured when the request was sent
			read.Band = maxClockOffset
			got, _ := JudgeLease(&tt.lease, tt.prev, read, grace)
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
		{"old, seen unchanged for less than the window", old, seenFor(old, 14*time.Second), Unknown},
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

func TestNodeClockLag(t *testing.T) {
	prevSent := decisionNow.Add(-10 * time.Second)
	seen := map[string]Sighting{"a": {RenewTime: prevSent.Add(-8 * time.Second)}}
	read := func(renewed time.Time) LeaseRead { return readAt(decisionNow, nodeLease("a", renewed)) }
	lag, known := NodeClockLag(read(decisionNow.Add(-5*time.Second)), prevSent, seen)
	assert.True(t, known)
	assert.Zero(t, lag, "renewed 5 s after the previous read: no clock behind")
	lag, known = NodeClockLag(read(decisionNow.Add(-16*time.Second)), prevSent, seen)
	assert.True(t, known)
	assert.Equal(t, 6*time.Second, lag, "renewed, by its clock, 6 s before the previous read that did not show it")
	_, known = NodeClockLag(read(prevSent.Add(-8*time.Second)), prevSent, seen)
	assert.False(t, known, "no lease advanced")
	_, known = NodeClockLag(read(decisionNow), time.Time{}, seen)
	assert.False(t, known, "no previous read")
	// Read 30 s apart: the lease renewed three times, the last 5 s ago by its clock; but the previous read
	// showed a renewTime 17 s old, so the renewal after it, 10 s later by the kubelet's clock, came
	// after that read on this replica's: the kubelet's clock is at least 7 s behind.
	prevSent = decisionNow.Add(-30 * time.Second)
	lag, _ = NodeClockLag(read(decisionNow.Add(-5*time.Second)), prevSent, map[string]Sighting{"a": {RenewTime: prevSent.Add(-17 * time.Second)}})
	assert.Equal(t, 7*time.Second, lag)
}

func TestKeepLag(t *testing.T) {
	now := decisionNow
	lag, at := keepLag(0, time.Time{}, 3*time.Second, now)
	assert.Equal(t, 3*time.Second, lag)
	lag, at = keepLag(lag, at, time.Second, now.Add(time.Minute))
	assert.Equal(t, 3*time.Second, lag, "the most lag seen is kept")
	lag, _ = keepLag(lag, at, time.Second, now.Add(lagMemory+time.Second))
	assert.Equal(t, time.Second, lag, "until it is lagMemory old")
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

// series is what probeSeries saw: the true times (since start) of the reads that decided ScaleDown,
// and for each the fraction of leases truly unrenewed for 0.75 × grace when the list was served.
type series struct {
	downs []time.Duration
	truth []float64
	reads int
}

// probeSeries reads the leases of a shoot whose 10 kubelets renew every 10 s (each on its own phase,
// drawn from seed) until they all stop at stop (zero: never), for span, as a probe does: every
// interval ± 10 %, or earlier when the last decision's RecheckAt says so (nextRun).
func probeSeries(t *testing.T, l lies, interval, span, stop time.Duration, seed uint64) series {
	const grace, renew = 40 * time.Second, 10 * time.Second
	rng := rand.New(rand.NewPCG(seed, 2))
	start := decisionNow
	names := make([]string, 10)
	phases := make([]time.Duration, 10)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
		phases[i] = time.Duration(rng.Int64N(int64(renew)))
	}
	// lastRenewal is the true time of kubelet i's last renewal at true time at.
	lastRenewal := func(i int, at time.Duration) time.Duration {
		if stop > 0 && at > stop {
			at = stop
		}
		if l.gap > 0 && at%(5*time.Minute) < l.gap {
			at -= at % (5 * time.Minute) // the renewals of the gap are missed
		}
		return (at-phases[i])/renew*renew + phases[i]
	}
	var out series
	var prevSent time.Time
	var nodesKnown bool
	var nodeLag time.Duration
	var lagAt time.Time
	seen := map[string]Sighting{}
	for at := time.Minute; at < span; {
		leases := make([]coordinationv1.Lease, len(names))
		unrenewed := 0
		for i, n := range names {
			last := lastRenewal(i, at)
			leases[i] = nodeLease(n, start.Add(last+l.nodeClock))
			if at-last >= threeQuarters(grace) {
				unrenewed++
			}
		}
		read := LeaseRead{Leases: leases, Sent: start.Add(at + l.replicaClock), Received: start.Add(at + l.bodyDelay + l.replicaClock)}
		serverDate := start.Add(at).Truncate(time.Second) // the shoot API server's clock is right
		if lag, known := NodeClockLag(read, prevSent, seen); known {
			nodesKnown = true
			nodeLag, lagAt = keepLag(nodeLag, lagAt, lag, read.Sent)
		}
		read.TrustAge = ServerClockAgrees(read, serverDate) && nodesKnown && nodeLag <= maxClockOffset
		read.Band = AgeBand(nodeLag)
		prevSent = read.Sent
		var d Decision
		d, seen = DecideScaling(names, read, seen, grace, 0.6)
		out.reads++
		if d.Action == ScaleDown {
			out.downs = append(out.downs, at)
			out.truth = append(out.truth, float64(unrenewed)/float64(len(names)))
		}
		period := time.Duration(float64(interval) * (0.9 + 0.2*rng.Float64()))
		wait, _ := nextRun(period, read.Received, d.RecheckAt)
		at += l.bodyDelay + wait
	}
	return out
}

// No ScaleDown is ever decided unless at least the fraction of the leases were truly unrenewed for
// 0.75 × grace when the list was served: whatever the clocks of the replica and the nodes say inside
// or outside the band the trust checks tolerate, however late the answers arrive, and for renewal
// stalls of every length (a stall of 25 s leaves leases up to 35 s unrenewed, which the rule rightly
// scales down). Over many seeds, at the intervals that matter.
func TestNoScaleDownBeforeThreeQuartersGraceOfTrueStillness(t *testing.T) {
	seeds := uint64(100)
	if testing.Short() {
		seeds = 30
	}
	for _, l := range []lies{
		{},
		{replicaClock: 3 * time.Second}, {replicaClock: time.Minute}, {replicaClock: -time.Minute},
		{nodeClock: -4 * time.Second}, {nodeClock: -90 * time.Second}, {nodeClock: 90 * time.Second},
		{bodyDelay: 8 * time.Second}, {bodyDelay: 28 * time.Second},
		{replicaClock: 10 * time.Minute, nodeClock: -10 * time.Minute, bodyDelay: 20 * time.Second},
		{gap: 20 * time.Second}, {gap: 25 * time.Second}, {gap: 30 * time.Second},
		{gap: 25 * time.Second, replicaClock: 3 * time.Second},
		{gap: 25 * time.Second, nodeClock: -4 * time.Second},
		{gap: 20 * time.Second, nodeClock: -4 * time.Second},
		{gap: 25 * time.Second, nodeClock: -10 * time.Second, bodyDelay: 8 * time.Second},
		{gap: 25 * time.Second, nodeClock: -20 * time.Second, bodyDelay: 8 * time.Second},
		{gap: 25 * time.Second, replicaClock: time.Minute},
		{gap: 25 * time.Second, nodeClock: -90 * time.Second},
	} {
		for _, interval := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second} {
			t.Run(fmt.Sprintf("%+v every %s", l, interval), func(t *testing.T) {
				for seed := range seeds {
					s := probeSeries(t, l, interval, 30*time.Minute, 0, seed)
					for i, f := range s.truth {
						require.GreaterOrEqual(t, f, 0.6, "seed %d: ScaleDown at %s with only %.0f%% of the leases truly unrenewed for 30 s", seed, s.downs[i], f*100)
					}
				}
			})
		}
	}
}

// A healthy shoot (kubelets renewing, no stall) is never scaled down, however its clocks lie.
func TestHealthyShootUnderLyingClocksAndSlowAnswers(t *testing.T) {
	for _, l := range []lies{
		{}, {replicaClock: time.Minute}, {replicaClock: -time.Minute},
		{nodeClock: -90 * time.Second}, {nodeClock: 90 * time.Second}, {bodyDelay: 28 * time.Second},
		{replicaClock: 10 * time.Minute, nodeClock: -10 * time.Minute, bodyDelay: 20 * time.Second},
	} {
		for _, interval := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second} {
			t.Run(fmt.Sprintf("%+v every %s", l, interval), func(t *testing.T) {
				for seed := range uint64(20) {
					assert.Empty(t, probeSeries(t, l, interval, time.Hour, 0, seed).downs, "seed %d", seed)
				}
			})
		}
	}
}

// A real meltdown is seen at the rule's moment: within 3 s of the sixth of ten leases' last renewal
// plus 0.75 × grace plus the band of clock error, at either interval, over many seeds (the early
// cycles RecheckAt asks for); and still seen, later but no later than the original at its worst,
// when the clocks cannot be trusted and only observation can tell.
func TestMeltdownIsSeenDespiteObservation(t *testing.T) {
	const stop, grace = 10 * time.Minute, 40 * time.Second
	for _, tt := range []struct {
		l        lies
		interval time.Duration
		within   time.Duration // after the rule's moment (threeQuarters(grace) after the sixth last renewal)
	}{
		{lies{}, 10 * time.Second, maxClockOffset + 3*time.Second},
		{lies{}, 30 * time.Second, maxClockOffset + 3*time.Second},
		{lies{replicaClock: time.Minute}, 10 * time.Second, 10*time.Second + 2*11*time.Second},
		{lies{replicaClock: -time.Minute}, 10 * time.Second, 10*time.Second + 2*11*time.Second},
		{lies{nodeClock: 90 * time.Second}, 10 * time.Second, 10*time.Second + 2*11*time.Second},
		{lies{replicaClock: time.Minute}, 30 * time.Second, 10*time.Second + 33*time.Second},
	} {
		t.Run(fmt.Sprintf("%+v every %s", tt.l, tt.interval), func(t *testing.T) {
			for seed := range uint64(100) {
				s := probeSeries(t, tt.l, tt.interval, stop+5*time.Minute, stop, seed)
				require.NotEmpty(t, s.downs, "seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 2))
				var lasts []time.Duration
				for range 10 {
					phase := time.Duration(rng.Int64N(int64(10 * time.Second)))
					lasts = append(lasts, (stop-phase)/(10*time.Second)*(10*time.Second)+phase)
				}
				slices.Sort(lasts)
				rule := lasts[5] + threeQuarters(grace)
				assert.GreaterOrEqual(t, s.downs[0], rule, "seed %d: not before the rule", seed)
				assert.LessOrEqual(t, s.downs[0], rule+tt.within, "seed %d: %s after the rule", seed, s.downs[0]-rule)
			}
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
