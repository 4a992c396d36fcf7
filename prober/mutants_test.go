package prober

// The tests of this file kill mutants of testdata/mutants.yaml (make mutants) that no other test
// killed: each pins a safety rule of the decision that can be switched off without another test
// noticing.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A late answer tells only that the API server served it between the request and the answer. So a
// lease's age is taken when the request was sent, and the watch of an unchanged renewTime runs from
// the answer that first showed it to the request of the read that shows it again: lateness can make
// a lease look younger, never older.
func TestLateAnswersNeverMakeALeaseLookOlder(t *testing.T) {
	const grace = 40 * time.Second // by age and by observation: 30 s
	now := decisionNow
	tests := []struct {
		name        string
		renewed     time.Time // the lease's renewTime
		first, then LeaseRead // two reads showing it; Leases is filled in
	}{
		{"29 s old when sent, answered 8 s later", now.Add(-29 * time.Second),
			LeaseRead{Sent: now.Add(-28 * time.Second), Received: now.Add(-20 * time.Second), TrustAge: true},
			LeaseRead{Sent: now, Received: now.Add(8 * time.Second), TrustAge: true}},
		{"watched 25 s to the request, whose answer took 8 s", now.Add(-time.Hour),
			LeaseRead{Sent: now.Add(-25 * time.Second), Received: now.Add(-25 * time.Second)},
			LeaseRead{Sent: now, Received: now.Add(8 * time.Second)}},
		{"first shown by an answer 8 s late, watched 25 s from it", now.Add(-time.Hour),
			LeaseRead{Sent: now.Add(-33 * time.Second), Received: now.Add(-25 * time.Second)},
			LeaseRead{Sent: now, Received: now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lease := nodeLease("n", tt.renewed)
			tt.first.Leases, tt.then.Leases = []coordinationv1.Lease{lease}, []coordinationv1.Lease{lease}
			_, seen := JudgeLease(&lease, nil, tt.first, grace)
			require.NotNil(t, seen)
			got, _ := JudgeLease(&lease, seen, tt.then, grace)
			assert.NotEqual(t, Expired, got)
		})
	}
}

// A kubelet whose lease lasts 120 s renews every 30 s: two reads less than 1.5 renew intervals apart
// may show the same renewTime of a live kubelet, whatever its age says.
func TestALeaseIsWatchedForItsOwnRenewInterval(t *testing.T) {
	const grace = 40 * time.Second
	now := decisionNow
	lease := nodeLease("n", now.Add(-40*time.Second))
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](120) // stability window 45 s
	seen := &Sighting{RenewTime: lease.Spec.RenewTime.Time, Since: now.Add(-35 * time.Second)}
	for _, trust := range []bool{true, false} {
		read := readAt(now, lease)
		read.TrustAge = trust
		got, _ := JudgeLease(&lease, seen, read, grace)
		assert.NotEqual(t, Expired, got, "clocks trusted: %t", trust)
	}
}

// aheadClock is a replica's clock that runs ahead of its shoot's (the API server's and the kubelets'),
// or behind when ahead is negative.
type aheadClock struct {
	*clocktesting.FakeClock
	ahead time.Duration
}

func (c aheadClock) Now() time.Time                  { return c.FakeClock.Now().Add(c.ahead) }
func (c aheadClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// dateless serves h's answers without a Date header, as a proxy that strips it would.
type dateless struct{ h http.Handler }

func (d dateless) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.h.ServeHTTP(datelessWriter{w}, r)
}

type datelessWriter struct{ http.ResponseWriter }

func (w datelessWriter) WriteHeader(code int) {
	w.Header()["Date"] = nil // nil, not deleted: the server would add its own
	w.ResponseWriter.WriteHeader(code)
}

func (w datelessWriter) Write(b []byte) (int, error) {
	w.Header()["Date"] = nil
	return w.ResponseWriter.Write(b)
}

// serveThrough points the fixture's kubeconfig Secret at a server that serves the shoot through h.
func (f *cycleFixture) serveThrough(t *testing.T, h http.Handler) {
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cycleNS, Name: f.m.Config.KubeConfigSecretName}
	require.NoError(t, f.m.Scaler.Client.Get(context.Background(), key, secret))
	secret.Data[KubeconfigKey] = kubeconfig(srv.URL, map[string]any{"token": "t"})
	require.NoError(t, f.m.Scaler.Client.Update(context.Background(), secret))
}

// The shoot API server's Date is the only check of this replica's clock that does not need a renewal
// at the right moment: without a Date that agrees, lease ages do not count, and observation alone
// decides. (The servers here send the fake clock's time, the kubelets keep it, the replica's is off.)
func TestLeaseAgesCountOnlyWhenTheShootsDateAgrees(t *testing.T) {
	// A replica 20 s ahead sees every lease 20 s older than it is; at a 30 s interval the renewals show
	// little of it. A 20 s renewal stall (a kube-apiserver restart), read while no lease is 30 s old,
	// scales nothing down.
	t.Run("ahead, with and without a Date", func(t *testing.T) {
		for _, h := range []func(*lyingShoot) http.Handler{
			func(s *lyingShoot) http.Handler { return s },
			func(s *lyingShoot) http.Handler { return dateless{s} },
		} {
			f := newCycleFixture(t, 5)
			f.m.Clock = aheadClock{FakeClock: f.clk, ahead: 20 * time.Second}
			f.serveThrough(t, h(f.shoot))
			results := f.cycles(t, 4, 30*time.Second)
			// From 5 s before the next read: the read 10 s later finds leases 15-25 s old.
			f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now().Add(-5 * time.Second) })
			results = append(results, f.cycles(t, 2, 10*time.Second)...)
			f.shoot.set(func(s *lyingShoot) { s.meltedAt = time.Time{} })
			results = append(results, f.cycles(t, 3, 10*time.Second)...)
			assert.NotContains(t, results, resultScaledDown)
		}
	})
	// A replica 60 s behind sees the leases of dead kubelets 60 s younger than they are. Once their
	// renewTimes have stood still for the stability window, they are no evidence of health.
	t.Run("behind", func(t *testing.T) {
		f := newCycleFixture(t, 5)
		f.m.Clock = aheadClock{FakeClock: f.clk, ahead: -time.Minute}
		f.cycles(t, 3, 10*time.Second)
		f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
		results := f.cycles(t, 3, 10*time.Second) // unchanged for 0, 10 and 20 s
		assert.NotContains(t, results[2:], resultHealthy, "%v", results)
	})
}

// slow answers every request after a delay, on the real clock: the cycle deadline is a context
// deadline, which only real time moves.
type slow struct {
	h  http.Handler
	by time.Duration
}

func (s slow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	timer := time.NewTimer(s.by)
	defer timer.Stop()
	select {
	case <-r.Context().Done():
		// No answer at all: returning would send an empty 200, which a client that gave up a moment
		// later could still read as the answer.
		panic(http.ErrAbortHandler)
	case <-timer.C:
	}
	s.h.ServeHTTP(w, r)
}

// A shoot API server that answers every call just under the probe timeout must not hold a probe
// worker for longer than the cycle deadline (twice the timeout) however many calls a cycle makes.
func TestACycleEndsAtItsDeadline(t *testing.T) {
	f := newCycleFixture(t, 5)
	// The deadline falls 400 ms after the first call's answer and 200 ms before the second's: wide
	// enough for a race-built test beside a loaded machine's other work (a deadline of 200 ms and
	// calls of 110 ms, margins of 90 and 20 ms, failed once in make test beside the other mutants).
	f.m.Config.ProbeTimeout = &metav1.Duration{Duration: 500 * time.Millisecond} // the deadline: 1 s
	f.m.Clients.Timeout = time.Minute                                            // so that no call times out on its own
	f.serveThrough(t, slow{h: f.shoot, by: 600 * time.Millisecond})
	result, err := f.p.cycle(context.Background()) // two calls, the nodes and the leases: 1.2 s
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, []string{resultAPIServer, resultLeases}, result)
}
