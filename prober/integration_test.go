package prober_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

const (
	grace   = 40 * time.Second
	expired = grace // renewed this long ago, a lease has expired (0.75 × grace)
	// expiryWait bounds the wait for a scale-down after leases expired: a few seconds when the replica
	// has seen the kubelets renew (awaitSeenRenewing), 0.75 × grace by observation alone otherwise.
	expiryWait = grace*3/4 + 20*time.Second
)

// levelOrder asserts that every deployment in first reached want before any in then did. The events come
// from a watch, which may deliver a write after a Get has already seen it: it waits until every deployment
// named has reached want in the events before it compares.
func levelOrder(t *testing.T, events func() []scaleEvent, want int32, first, then []string) {
	t.Helper()
	reachedAt := func() map[string]time.Time {
		reached := map[string]time.Time{}
		for _, e := range events() {
			if _, ok := reached[e.name]; !ok && e.replicas == want {
				reached[e.name] = e.at
			}
		}
		return reached
	}
	names := append(append([]string(nil), first...), then...)
	require.Eventually(t, func() bool {
		reached := reachedAt()
		for _, name := range names {
			if _, ok := reached[name]; !ok {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "the watch delivers a write of %d replicas to each of %v", want, names)
	reached := reachedAt()
	for _, a := range first {
		for _, b := range then {
			assert.True(t, !reached[a].After(reached[b]), "%s must reach %d replicas before %s", a, want, b)
		}
	}
}

func TestMeltdownScalesDownThenUpInLevelOrder(t *testing.T) {
	seed.Require(t)
	s := newShoot(t, 3)
	events := s.watchScaling()
	r := startReplica(t, seed.Namespace(t), "dwd-0")
	require.Eventually(t, func() bool { return r.Prober.Probing(s.name) }, 20*time.Second, 50*time.Millisecond)
	s.awaitSeenRenewing()

	// Two of three leases expire: 0.67 >= 0.6.
	crossed := time.Now()
	s.renewLeases(2, crossed.Add(-expired))
	require.Eventually(t, func() bool { return s.replicas("kube-controller-manager") == 0 }, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return len(events()) > 0 }, 10*time.Second, 20*time.Millisecond, "the watch delivers the first write")
	firstWrite := events()[0].at
	t.Logf("leases crossed the threshold → first scale-down write: %s (probe interval 1s)", firstWrite.Sub(crossed).Round(time.Millisecond))
	// The first read after the change sees a changed renewTime (fresh); the leases count as expired once
	// they have been seen unchanged for the stability window (1.5 s for the fixture's 4 s leases).
	assert.LessOrEqual(t, firstWrite.Sub(crossed), time.Second+1500*time.Millisecond+2*time.Second)
	for _, name := range dependents {
		d := s.deployment(name)
		assert.Equal(t, int32(0), *d.Spec.Replicas, name)
		assert.Equal(t, "2", d.Annotations[scaler.ReplicasAnnotation], name)
		assert.Contains(t, d.Annotations, scaler.MeltdownProtectionAnnotation, name)
	}
	levelOrder(t, events, 0, []string{"machine-controller-manager", "cluster-autoscaler"}, []string{"kube-controller-manager"})

	// The leases renew: scale-up in the up levels, to the annotated replicas, annotations gone.
	s.renewLeases(3, time.Now())
	require.Eventually(t, func() bool { return s.replicas("cluster-autoscaler") == 2 }, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		for _, name := range dependents {
			d := s.deployment(name)
			if *d.Spec.Replicas != 2 || d.Annotations[scaler.ReplicasAnnotation] != "" {
				return false
			}
			if _, ok := d.Annotations[scaler.MeltdownProtectionAnnotation]; ok {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond)
	levelOrder(t, events, 2, []string{"kube-controller-manager"}, []string{"machine-controller-manager"})
	levelOrder(t, events, 2, []string{"machine-controller-manager"}, []string{"cluster-autoscaler"})
}

// A probe decides on the Machines it listed before only until one of them changes (MachineChanges):
// two nodes whose Machines are Terminating are no candidates, so their stopped leases decide nothing;
// once their Machines run again, the next cycles find the meltdown.
func TestAProbeSeesAChangedMachine(t *testing.T) {
	seed.Require(t)
	s := newShoot(t, 3)
	s.setMachinePhase(0, prober.MachinePhaseTerminating)
	s.setMachinePhase(1, prober.MachinePhaseTerminating)
	r := startReplica(t, seed.Namespace(t), "dwd-0")
	require.Eventually(t, func() bool { return r.Prober.Probing(s.name) }, 20*time.Second, 50*time.Millisecond)
	s.awaitSeenRenewing()
	s.renewLeases(2, time.Now().Add(-expired))
	s.awaitSeenRenewing()
	require.Equal(t, int32(2), s.replicas("kube-controller-manager"), "no meltdown among the candidates yet")

	s.setMachinePhase(0, "Running")
	s.setMachinePhase(1, "Running")
	require.Eventually(t, func() bool { return s.replicas("kube-controller-manager") == 0 }, 20*time.Second, 50*time.Millisecond)
}

func TestScalingRespectsIgnoreAndOptionalResources(t *testing.T) {
	seed.Require(t)
	ignored, optionalMissing, requiredMissing := newShoot(t, 2), newShoot(t, 2), newShoot(t, 2)
	d := ignored.deployment("kube-controller-manager")
	d.Annotations = map[string]string{scaler.IgnoreScalingAnnotation: "true"}
	require.NoError(t, seed.Client.Update(context.Background(), d))
	optionalMissing.deleteDeployment("cluster-autoscaler")
	requiredMissing.deleteDeployment("machine-controller-manager")
	startReplica(t, seed.Namespace(t), "dwd-0")

	for _, s := range []*shootNS{ignored, optionalMissing, requiredMissing} {
		s.awaitSeenRenewing()
		s.renewLeases(2, time.Now().Add(-expired))
	}
	require.Eventually(t, func() bool {
		return ignored.replicas("machine-controller-manager") == 0 && optionalMissing.replicas("kube-controller-manager") == 0
	}, expiryWait, 50*time.Millisecond, "the other resources are scaled down")
	require.Eventually(t, func() bool { return requiredMissing.replicas("cluster-autoscaler") == 0 }, 20*time.Second, 50*time.Millisecond,
		"a missing required resource fails its level; the other resources of that level still run")
	assert.Equal(t, int32(2), ignored.replicas("kube-controller-manager"), "ignore-scaling is never scaled")
	assert.Equal(t, int32(2), requiredMissing.replicas("kube-controller-manager"),
		"a failed level stops the flow before the next level")
}

func TestHibernationStopsProbingAndNeverScalesUp(t *testing.T) {
	seed.Require(t)
	s := newShoot(t, 2)
	r := startReplica(t, seed.Namespace(t), "dwd-0")
	require.Eventually(t, func() bool { return r.Prober.Probing(s.name) }, 20*time.Second, 50*time.Millisecond)

	s.updateShoot(shootJSON(func(shoot map[string]any) {
		shoot["spec"].(map[string]any)["hibernation"] = map[string]any{"enabled": true}
	}))
	require.Eventually(t, func() bool { return !r.Prober.Probing(s.name) }, 10*time.Second, 50*time.Millisecond)
	// Gardener scales the control plane down for hibernation; the leases stay healthy.
	for _, name := range dependents {
		d := s.deployment(name)
		d.Spec.Replicas = new(int32)
		require.NoError(t, seed.Client.Update(context.Background(), d))
	}
	assert.Never(t, func() bool { return s.replicas("kube-controller-manager") != 0 || r.Prober.Probing(s.name) },
		3*time.Second, 100*time.Millisecond, "a hibernated shoot is neither probed nor scaled up")
}

func TestShootAPIServerDownNeverScales(t *testing.T) {
	seed.Require(t)
	s := newShoot(t, 2)
	s.setSecret(unreachableKubeconfig())
	startReplica(t, seed.Namespace(t), "dwd-0")
	s.renewLeases(2, time.Now().Add(-expired))
	assert.Never(t, func() bool { return s.replicas("machine-controller-manager") != 2 }, 4*time.Second, 100*time.Millisecond,
		"without an answer from the shoot's API server nothing is scaled")
}

func TestBrokenKubeconfigIsReported(t *testing.T) {
	seed.Require(t)
	s := newShoot(t, 2)
	s.setSecret([]byte("this is not a kubeconfig"))
	reported := metricstest.Sum(t, "dwd_shoot_config_errors_total", map[string]string{"kind": "kubeconfig"})
	startReplica(t, seed.Namespace(t), "dwd-0")
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		require.NoError(t, seed.Client.List(context.Background(), events, client.InNamespace(s.name)))
		for _, e := range events.Items {
			if e.Reason == "InvalidKubeconfig" && e.InvolvedObject.Name == "shoot-access-dependency-watchdog-probe" {
				assert.NotContains(t, e.Message, "this is not a kubeconfig", "never the Secret's contents")
				return true
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "an Event on the Secret says what is wrong")
	assert.Equal(t, reported+1, metricstest.Sum(t, "dwd_shoot_config_errors_total", map[string]string{"kind": "kubeconfig"}),
		"counted once, not on every probe")
}

func TestMalformedShootAffectsOnlyItsCluster(t *testing.T) {
	seed.Require(t)
	broken, healthy := newShoot(t, 2), newShoot(t, 2)
	broken.updateShoot(shootJSON(func(shoot map[string]any) {
		shoot["spec"].(map[string]any)["hibernation"] = map[string]any{"enabled": "not a boolean"}
	}))
	reported := metricstest.Sum(t, "dwd_shoot_config_errors_total", map[string]string{"kind": "cluster"})
	invalid := map[string]string{"reason": prober.UnprotectedInvalidCluster}
	unprotected := metricstest.Sum(t, "dwd_shoots_unprotected", invalid)
	r := startReplica(t, seed.Namespace(t), "dwd-0")
	require.Eventually(t, func() bool { return r.Prober.Probing(healthy.name) }, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		require.NoError(t, seed.Client.List(context.Background(), events, client.InNamespace("default")))
		for _, e := range events.Items {
			if e.Reason == "InvalidShoot" && e.InvolvedObject.Name == broken.name {
				assert.Contains(t, e.Message, "spec.hibernation.enabled")
				return true
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "an Event on the Cluster names the bad field")
	assert.False(t, r.Prober.Probing(broken.name))
	assert.Equal(t, reported+1, metricstest.Sum(t, "dwd_shoot_config_errors_total", map[string]string{"kind": "cluster"}))
	assert.Equal(t, unprotected+1, metricstest.Sum(t, "dwd_shoots_unprotected", invalid), "counted while it is broken")

	healthy.awaitSeenRenewing()
	healthy.renewLeases(2, time.Now().Add(-expired))
	require.Eventually(t, func() bool { return healthy.replicas("kube-controller-manager") == 0 }, expiryWait, 50*time.Millisecond,
		"the other shoot is probed and scaled as usual")

	broken.updateShoot(shootJSON(func(map[string]any) {}))
	require.Eventually(t, func() bool { return r.Prober.Probing(broken.name) }, 20*time.Second, 50*time.Millisecond, "a repaired Cluster is probed")
	assert.Equal(t, unprotected, metricstest.Sum(t, "dwd_shoots_unprotected", invalid), "and no longer counted")
}

func TestTwoReplicasProbeEachShootOnce(t *testing.T) {
	seed.Require(t)
	shoots := make([]*shootNS, 8)
	for i := range shoots {
		shoots[i] = newShoot(t, 1)
	}
	leaseNS := seed.Namespace(t)
	a, b := startReplica(t, leaseNS, "dwd-0"), startReplica(t, leaseNS, "dwd-1")
	require.Eventually(t, func() bool {
		for _, s := range shoots {
			if a.Prober.Probing(s.name) == b.Prober.Probing(s.name) {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "every shoot is probed by exactly one replica")
	require.Eventually(t, func() bool {
		for _, s := range shoots {
			if mayWrite(a, s.name) == mayWrite(b, s.name) {
				return false
			}
		}
		return true
	}, 10*time.Second, 100*time.Millisecond, "the scale writes of every shoot go out from exactly one replica")
	assert.Never(t, func() bool {
		for _, s := range shoots {
			if a.Prober.Probing(s.name) && b.Prober.Probing(s.name) {
				return true
			}
		}
		return false
	}, 2*time.Second, 20*time.Millisecond)
}

// mayWrite reports whether r's Scaler would send a write to a resource of namespace now: Setup gives
// it the Coordinator's Guard.
func mayWrite(r *replica, namespace string) bool {
	_, cancel, err := r.Prober.Scaler.Guard(context.Background(), namespace)
	cancel()
	return err == nil
}

// TestThrottledShootIsLeftAloneTenSeconds steps the prober's clock until the throttled shoot is
// probed again, a second at a time, and reads the gap on that clock: ten seconds, not the interval.
func TestThrottledShootIsLeftAloneTenSeconds(t *testing.T) {
	seed.Require(t)
	clk := clocktesting.NewFakeClock(time.Now())
	var mu sync.Mutex
	var calls []time.Time
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		calls = append(calls, clk.Now())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1") // as real API servers send; client-go would retry it by itself
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`))
	}))
	t.Cleanup(server.Close)
	s := newShoot(t, 2)
	s.setSecret(kubeconfigFor(server.URL))
	startReplicaClocked(t, seed.Namespace(t), "dwd-0", clk)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	// The first probe of a shoot comes within its first interval, at a moment of its own.
	require.Eventually(t, func() bool { clk.Step(100 * time.Millisecond); return count() >= 1 }, 20*time.Second, 20*time.Millisecond,
		"the shoot is probed")
	require.Eventually(t, func() bool { clk.Step(time.Second); return count() >= 2 }, 20*time.Second, 50*time.Millisecond,
		"the throttled shoot is probed again")
	mu.Lock()
	gap := calls[1].Sub(calls[0])
	mu.Unlock()
	t.Logf("after a 429 the next probe came %s later on the prober's clock (probe interval 1s)", gap)
	assert.GreaterOrEqual(t, gap, 10*time.Second)
}

func TestHealthyProbesMakeNoSeedRequests(t *testing.T) {
	seed.Require(t)
	shoots := []*shootNS{newShoot(t, 3), newShoot(t, 3), newShoot(t, 3)}
	leaseNS := seed.Namespace(t)
	r := startReplica(t, leaseNS, "dwd-0")
	require.Eventually(t, func() bool {
		for _, s := range shoots {
			if !r.Prober.Probing(s.name) {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond)
	healthy := func() float64 { return metricstest.Sum(t, "dwd_probes_total", map[string]string{"result": "healthy"}) }
	seedRequests := func() float64 {
		return metricstest.Sum(t, "dwd_api_requests_total", map[string]string{"api": "seed", "client": "dwd-0-" + leaseNS})
	}
	start := healthy()
	require.Eventually(t, func() bool { return healthy() >= start+3 }, 20*time.Second, 50*time.Millisecond, "steady state")
	probes, requests := healthy(), seedRequests()
	require.Eventually(t, func() bool { return healthy() >= probes+15 }, 30*time.Second, 50*time.Millisecond)
	perProbe := (seedRequests() - requests) / (healthy() - probes)
	t.Logf("seed API requests per healthy probe: %.3f over %.0f probes", perProbe, healthy()-probes)
	assert.Zero(t, perProbe, "a healthy probe reads the seed from caches only")
}
