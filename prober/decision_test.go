package prober

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var decisionNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// nodeLease is a kube-node-lease Lease last renewed at renewed.
func nodeLease(name string, renewed time.Time) coordinationv1.Lease {
	renew := metav1.NewMicroTime(renewed)
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &renew},
	}
}

func TestLeaseExpired(t *testing.T) {
	renewed := decisionNow.Add(-time.Hour)
	lease := nodeLease("n", renewed)
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		grace time.Duration
		now   time.Time
		want  bool
	}{
		{"one nanosecond before renewTime + 0.75 × grace", &lease, 40 * time.Second, renewed.Add(30*time.Second - 1), false},
		{"exactly at renewTime + 0.75 × grace", &lease, 40 * time.Second, renewed.Add(30 * time.Second), true},
		{"after", &lease, 40 * time.Second, renewed.Add(31 * time.Second), true},
		{"just renewed", &lease, 40 * time.Second, renewed, false},
		{"renewed in the future (clock offset)", &lease, 40 * time.Second, renewed.Add(-time.Minute), false},
		{"odd grace rounds down: 0.75 × 1s", &lease, time.Second, renewed.Add(750*time.Millisecond - 1), false},
		{"odd grace rounds down: at 750ms", &lease, time.Second, renewed.Add(750 * time.Millisecond), true},
		{"zero grace: expired at renewTime", &lease, 0, renewed, true},
		{"zero grace: not before renewTime", &lease, 0, renewed.Add(-1), false},
		{"no renewTime counts as expired", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, 40 * time.Second, renewed, true},
		{"nil lease counts as expired", nil, 40 * time.Second, renewed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, LeaseExpired(tt.lease, tt.grace, tt.now))
		})
	}
}

func TestThreeQuarters(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{
		{0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 3}, {7, 5},
		{40 * time.Second, 30 * time.Second}, {2 * time.Minute, 90 * time.Second},
		{math.MaxInt64, 6917529027641081855}, // floor(0.75 × (2^63−1)), no overflow
	} {
		t.Run(tt.in.String(), func(t *testing.T) {
			assert.Equal(t, tt.want, threeQuarters(tt.in))
		})
	}
}

func TestDecideScalingTable(t *testing.T) {
	const grace = 40 * time.Second
	fresh := decisionNow.Add(-time.Second)
	stale := decisionNow.Add(-time.Minute)
	// leases returns expired stale leases and healthy fresh ones for nodes n0, n1, ...
	leases := func(expired, healthy int) []coordinationv1.Lease {
		out := make([]coordinationv1.Lease, 0, expired+healthy)
		for i := range expired + healthy {
			renewed := fresh
			if i < expired {
				renewed = stale
			}
			out = append(out, nodeLease(fmt.Sprintf("n%d", i), renewed))
		}
		return out
	}
	names := func(n int) []string {
		out := make([]string, 0, n)
		for i := range n {
			out = append(out, fmt.Sprintf("n%d", i))
		}
		return out
	}
	noRenewTime := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	// Every lease has been seen with its renewTime for 20 s, past the 15 s stability window.
	tests := []struct {
		name       string
		candidates []string
		leases     []coordinationv1.Lease
		fraction   float64
		want       Decision
	}{
		{"no candidates", nil, nil, 0.6, Decision{Action: ScaleUp}},
		{"no candidates, leases of other nodes", nil, leases(3, 0), 0.6, Decision{Action: ScaleUp}},
		{"candidates without leases", names(3), nil, 0.6, Decision{Action: ScaleUp, WithoutLease: 3}},
		{"one candidate, expired", names(1), leases(1, 0), 0.6, Decision{Action: None, Candidates: 1, Expired: 1, ExpiredFraction: 1}},
		{"one candidate, healthy", names(1), leases(0, 1), 0.6, Decision{Action: None, Candidates: 1}},
		{"one of three candidates has a lease", names(3), leases(1, 0)[:1], 0.6, Decision{Action: None, Candidates: 1, Expired: 1, ExpiredFraction: 1, WithoutLease: 2}},
		{"all healthy", names(5), leases(0, 5), 0.6, Decision{Action: ScaleUp, Candidates: 5}},
		{"threshold exactly reached: 3 of 5 at 0.6", names(5), leases(3, 2), 0.6, Decision{Action: ScaleDown, Candidates: 5, Expired: 3, ExpiredFraction: 0.6}},
		{"just below: 2 of 5 at 0.6", names(5), leases(2, 3), 0.6, Decision{Action: ScaleUp, Candidates: 5, Expired: 2, ExpiredFraction: 0.4}},
		{"threshold exactly reached: 60 of 100 at 0.6", names(100), leases(60, 40), 0.6, Decision{Action: ScaleDown, Candidates: 100, Expired: 60, ExpiredFraction: 0.6}},
		{"just below: 59 of 100 at 0.6", names(100), leases(59, 41), 0.6, Decision{Action: ScaleUp, Candidates: 100, Expired: 59, ExpiredFraction: 0.59}},
		{"threshold exactly reached: 7 of 10 at 0.7", names(10), leases(7, 3), 0.7, Decision{Action: ScaleDown, Candidates: 10, Expired: 7, ExpiredFraction: 0.7}},
		{"all expired", names(2), leases(2, 0), 1, Decision{Action: ScaleDown, Candidates: 2, Expired: 2, ExpiredFraction: 1}},
		{"one of two expired at fraction 1", names(2), leases(1, 1), 1, Decision{Action: ScaleUp, Candidates: 2, Expired: 1, ExpiredFraction: 0.5}},
		{"leases of non-candidates are ignored", names(2), leases(2, 3), 0.6, Decision{Action: ScaleDown, Candidates: 2, Expired: 2, ExpiredFraction: 1}},
		{"a candidate without a lease is not counted", names(4), leases(2, 1), 0.6, Decision{Action: ScaleDown, Candidates: 3, Expired: 2, ExpiredFraction: 2.0 / 3, WithoutLease: 1}},
		{"duplicate candidate names count once", []string{"n0", "n0", "n1"}, leases(1, 1), 0.6, Decision{Action: ScaleUp, Candidates: 2, Expired: 1, ExpiredFraction: 0.5}},
		{"duplicate leases count once", names(2), append(leases(1, 1), leases(1, 0)...), 0.6, Decision{Action: ScaleUp, Candidates: 2, Expired: 1, ExpiredFraction: 0.5}},
		{"more candidates without a lease than with one", names(5), leases(2, 0), 0.6, Decision{Action: None, Candidates: 2, Expired: 2, ExpiredFraction: 1, WithoutLease: 3}},
		{"a lease without renewTime is no evidence either way", names(2), append(leases(0, 1), noRenewTime), 0.5, Decision{Action: None, Candidates: 2, Unknown: 1}},
		{"a lease without renewTime does not make a healthy shoot inconclusive", names(3), append(leases(0, 2), coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}), 0.6, Decision{Action: ScaleUp, Candidates: 3, Unknown: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := DecideScaling(tt.candidates, readAt(decisionNow, tt.leases...), watched(tt.leases, 20*time.Second), grace, tt.fraction)
			got.RecheckAt = time.Time{} // TestRecheckAt
			assert.Equal(t, tt.want, got)
		})
	}
}

// readAt is a read of leases sent and answered at now, with clocks that agree.
func readAt(now time.Time, leases ...coordinationv1.Lease) LeaseRead {
	return LeaseRead{Leases: leases, Sent: now, Received: now, TrustAge: true}
}

// watched returns sightings of the leases' renewTimes, each first seen for before decisionNow.
func watched(leases []coordinationv1.Lease, before time.Duration) map[string]Sighting {
	seen := map[string]Sighting{}
	for _, l := range leases {
		if l.Spec.RenewTime != nil {
			seen[l.Name] = Sighting{RenewTime: l.Spec.RenewTime.Time, Since: decisionNow.Add(-before)}
		}
	}
	return seen
}

func TestRecheckAt(t *testing.T) {
	const grace = 40 * time.Second // by age: 30 s
	names := make([]string, 10)
	renewing := make([]coordinationv1.Lease, 10)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
		renewing[i] = nodeLease(names[i], decisionNow.Add(-time.Duration(i)*time.Second))
	}
	advanced := map[string]Sighting{}
	for _, l := range renewing {
		advanced[l.Name] = Sighting{RenewTime: l.Spec.RenewTime.Add(-10 * time.Second), Since: decisionNow.Add(-10 * time.Second)}
	}
	t.Run("trusted clocks: when the sixth of ten leases crosses 0.75 × grace, should none renew", func(t *testing.T) {
		d, _ := DecideScaling(names, readAt(decisionNow, renewing...), advanced, grace, 0.6)
		require.Equal(t, ScaleUp, d.Action)
		assert.Equal(t, 10, d.Renewed)
		assert.Equal(t, decisionNow.Add(-4*time.Second+30*time.Second), d.RecheckAt, "renewed 4 s ago, the sixth oldest")
	})
	t.Run("the band of clock error moves it on", func(t *testing.T) {
		read := readAt(decisionNow, renewing...)
		read.Band = 3 * time.Second
		d, _ := DecideScaling(names, read, advanced, grace, 0.6)
		assert.Equal(t, decisionNow.Add(-4*time.Second+33*time.Second), d.RecheckAt)
	})
	t.Run("untrusted clocks: at the end of the stability window of a lease that looks old", func(t *testing.T) {
		read := readAt(decisionNow, renewing...)
		read.TrustAge = false
		d, _ := DecideScaling(names, read, nil, grace, 0.6)
		require.Equal(t, None, d.Action)
		assert.Equal(t, decisionNow.Add(15*time.Second), d.RecheckAt)
	})
	t.Run("no recheck once the decision is a scale-down, or with one candidate", func(t *testing.T) {
		old := nodeLease("n0", decisionNow.Add(-time.Minute))
		d, _ := DecideScaling([]string{"n0", "n1"}, readAt(decisionNow, old, nodeLease("n1", decisionNow.Add(-time.Minute))),
			watched([]coordinationv1.Lease{old, nodeLease("n1", decisionNow.Add(-time.Minute))}, 20*time.Second), grace, 0.6)
		require.Equal(t, ScaleDown, d.Action)
		assert.Zero(t, d.RecheckAt)
		d, _ = DecideScaling([]string{"n0"}, readAt(decisionNow, renewing[0]), advanced, grace, 0.6)
		assert.Zero(t, d.RecheckAt)
	})
}

func TestActionString(t *testing.T) {
	assert.Equal(t, "None", None.String())
	assert.Equal(t, "ScaleUp", ScaleUp.String())
	assert.Equal(t, "ScaleDown", ScaleDown.String())
	assert.Equal(t, "Action(9)", Action(9).String())
}

func BenchmarkDecideScaling(b *testing.B) {
	const n = 100
	candidates := make([]string, 0, n)
	leases := make([]coordinationv1.Lease, 0, n)
	for i := range n {
		name := fmt.Sprintf("shoot--p--s-worker-plain-z1-5d8f7-%05d", i)
		candidates = append(candidates, name)
		renewed := decisionNow.Add(-time.Second)
		if i%3 == 0 {
			renewed = decisionNow.Add(-time.Minute)
		}
		leases = append(leases, nodeLease(name, renewed))
	}
	read, seen := readAt(decisionNow, leases...), watched(leases, 20*time.Second)
	b.ReportAllocs()
	for b.Loop() {
		DecideScaling(candidates, read, seen, 40*time.Second, 0.6)
	}
}
