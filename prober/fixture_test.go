package prober_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/config/configtest"
	"github.com/sharded-dwd/dependency-watchdog/internal/apimetrics"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/replica/replicatest"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

// seed is the seed's API server; shoot plays the API server of every shoot in these tests.
var seed, shoot *test.Environment

func TestMain(m *testing.M) { os.Exit(test.Main(m, &seed, &shoot)) }

// proberConfig is the original's example with short timings: a 40s grace period expires a lease 30s
// after its renewal.
const proberConfig = `
kubeConfigSecretName: shoot-access-dependency-watchdog-probe
probeInterval: 1s
initialDelay: 0s
probeTimeout: 5s
kcmNodeMonitorGraceDuration: 40s
nodeLeaseFailureFraction: 0.6
dependentResourceInfos:
  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 0, timeout: 2s}
    scaleDown: {level: 1, timeout: 2s}
  - ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 1, timeout: 2s}
    scaleDown: {level: 0, timeout: 2s}
  - ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
    optional: true
    scaleUp: {level: 2, timeout: 2s}
    scaleDown: {level: 0, timeout: 2s}
`

var dependents = []string{"kube-controller-manager", "machine-controller-manager", "cluster-autoscaler"}

// replica is a prober replica of the tests: the in-process replica and its prober.
type replica struct {
	*replicatest.Replica
	Prober *prober.Manager
}

// startReplica runs a prober replica as member of a group whose leases live in leaseNS; its seed
// requests count as client member-leaseNS.
func startReplica(t *testing.T, leaseNS, member string) *replica {
	return startReplicaClocked(t, leaseNS, member, nil)
}

// startReplicaClocked is startReplica whose prober runs on clk, unless it is nil.
func startReplicaClocked(t *testing.T, leaseNS, member string, clk clock.WithTicker) *replica {
	return startReplicaWith(t, leaseNS, member, func(o *prober.Options) { o.Clock = clk })
}

// startReplicaWith is startReplica whose prober's options tune changes.
func startReplicaWith(t *testing.T, leaseNS, member string, tune func(*prober.Options)) *replica {
	through := rest.CopyConfig(seed.Config)
	through.Wrap(apimetrics.CountRequests("seed", member+"-"+leaseNS))
	cfg := configtest.Prober(t, proberConfig)
	r := &replica{}
	r.Replica = replicatest.Start(t, replicatest.Options{Seed: seed.Config, Through: through, Group: "probers",
		LeaseNamespace: leaseNS, Member: member, Cache: prober.CacheOptions(cfg),
		Setup: func(ctx context.Context, mgr manager.Manager, owner sharding.Owner) (err error) {
			opts := prober.Options{Config: cfg, Owner: owner, Workers: 8, QPS: 50, Burst: 100}
			tune(&opts)
			r.Prober, err = prober.Setup(ctx, mgr, opts)
			return err
		}})
	return r
}

// shootNS is one simulated shoot: a namespace in the seed with its Cluster, kubeconfig Secret,
// dependent Deployments and Machines, and nodes with leases in the shoot API server.
type shootNS struct {
	t     *testing.T
	name  string
	nodes []string

	mu      sync.Mutex
	stopped map[string]bool // nodes whose kubelet does not renew its lease
}

// newShoot creates a shoot namespace with the given number of nodes, all healthy: their kubelets
// renew their leases every second until the test ends.
func newShoot(t *testing.T, nodes int) *shootNS {
	s := &shootNS{t: t, name: seed.Namespace(t), stopped: map[string]bool{}}
	s.createCluster(nil)
	s.createSecret(shoot.KubeConfig)
	for _, name := range dependents {
		s.createDeployment(name, 2)
	}
	for i := range nodes {
		s.addNode(fmt.Sprintf("%s-node-%d", s.name, i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.runKubelets(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// runKubelets renews the leases of the running kubelets every second until ctx ends.
func (s *shootNS) runKubelets(ctx context.Context) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		for _, name := range s.nodes {
			s.mu.Lock()
			if !s.stopped[name] {
				_ = s.setRenewTime(ctx, name, time.Now()) // a missed renewal is what kubelets see too
			}
			s.mu.Unlock()
		}
	}
}

// shootJSON is a Shoot with one worker pool whose last operation succeeded.
func shootJSON(mutate func(map[string]any)) map[string]any {
	shoot := map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
		"metadata": map[string]any{"name": "s", "namespace": "garden-p", "creationTimestamp": "2024-01-01T00:00:00Z"},
		"spec": map[string]any{
			"hibernation": map[string]any{"enabled": false},
			"provider":    map[string]any{"workers": []any{map[string]any{"name": "pool-a"}}},
		},
		"status": map[string]any{"lastOperation": map[string]any{"type": "Reconcile", "state": "Succeeded"}},
	}
	if mutate != nil {
		mutate(shoot)
	}
	return shoot
}

func (s *shootNS) cluster() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(prober.ClusterGVK)
	u.SetName(s.name)
	return u
}

func (s *shootNS) createCluster(mutate func(map[string]any)) {
	c := s.cluster()
	c.Object["spec"] = map[string]any{"shoot": shootJSON(mutate), "seed": map[string]any{}, "cloudProfile": map[string]any{}}
	require.NoError(s.t, seed.Client.Create(context.Background(), c))
	s.t.Cleanup(func() { _ = seed.Client.Delete(context.Background(), s.cluster()) })
}

// updateShoot replaces the Shoot in the Cluster.
func (s *shootNS) updateShoot(shoot any) {
	c := s.cluster()
	require.NoError(s.t, seed.Client.Get(context.Background(), client.ObjectKeyFromObject(c), c))
	require.NoError(s.t, unstructured.SetNestedField(c.Object, shoot, "spec", "shoot"))
	require.NoError(s.t, seed.Client.Update(context.Background(), c))
}

func (s *shootNS) createSecret(kubeconfig []byte) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shoot-access-dependency-watchdog-probe", Namespace: s.name},
		Data: map[string][]byte{"kubeconfig": kubeconfig}}
	require.NoError(s.t, seed.Client.Create(context.Background(), secret))
}

func (s *shootNS) setSecret(kubeconfig []byte) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.name, Name: "shoot-access-dependency-watchdog-probe"}
	require.NoError(s.t, seed.Client.Get(context.Background(), key, secret))
	secret.Data["kubeconfig"] = kubeconfig
	require.NoError(s.t, seed.Client.Update(context.Background(), secret))
}

func (s *shootNS) createDeployment(name string, replicas int32) {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}},
	}}
	require.NoError(s.t, seed.Client.Create(context.Background(), d))
}

func (s *shootNS) deleteDeployment(name string) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.name}}
	require.NoError(s.t, seed.Client.Delete(context.Background(), d))
}

func (s *shootNS) deployment(name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	require.NoError(s.t, seed.Client.Get(context.Background(), client.ObjectKey{Namespace: s.name, Name: name}, d))
	return d
}

func (s *shootNS) replicas(name string) int32 {
	return *s.deployment(name).Spec.Replicas
}

// addNode creates a node of pool-a with a fresh lease in the shoot and its Machine in the seed. The
// lease says it lasts 4 s (a kubelet would renew it every second), so that the prober's stability
// window is 1.5 s instead of the 15 s of a 40 s lease.
func (s *shootNS) addNode(name string) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{prober.LabelWorkerPool: "pool-a"}}}
	require.NoError(s.t, shoot.Client.Create(ctx, node))
	s.t.Cleanup(func() { _ = shoot.Client.Delete(context.Background(), node) })
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](4), RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
	require.NoError(s.t, shoot.Client.Create(ctx, lease))
	s.t.Cleanup(func() { _ = shoot.Client.Delete(context.Background(), lease) })

	machine := &unstructured.Unstructured{}
	machine.SetGroupVersionKind(prober.MachineGVK)
	machine.SetNamespace(s.name)
	machine.SetName("machine-" + name)
	machine.SetLabels(map[string]string{prober.MachineNodeLabel: name})
	machine.Object["spec"] = map[string]any{}
	require.NoError(s.t, seed.Client.Create(ctx, machine))
	require.NoError(s.t, unstructured.SetNestedField(machine.Object, "Running", "status", "currentStatus", "phase"))
	require.NoError(s.t, seed.Client.Status().Update(ctx, machine))
	s.nodes = append(s.nodes, name)
}

// setMachinePhase sets the phase of the Machine backing the shoot's i-th node.
func (s *shootNS) setMachinePhase(i int, phase string) {
	s.t.Helper()
	ctx := context.Background()
	require.NoError(s.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		machine := &unstructured.Unstructured{}
		machine.SetGroupVersionKind(prober.MachineGVK)
		if err := seed.Client.Get(ctx, client.ObjectKey{Namespace: s.name, Name: "machine-" + s.nodes[i]}, machine); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(machine.Object, phase, "status", "currentStatus", "phase"); err != nil {
			return err
		}
		return seed.Client.Status().Update(ctx, machine)
	}))
}

// renewLeases sets the renewTime of the first n node leases to at. A recent time lets their kubelets
// renew again. A time in the past stops them (a meltdown); so that the test need not wait for the
// leases to age, each is created anew with that renewTime, as a kubelet that registered its node
// anew would (a renewTime that went back in time on the same lease would mark the answer stale).
func (s *shootNS) renewLeases(n int, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := context.Background()
	for _, name := range s.nodes[:n] {
		s.stopped[name] = time.Since(at) > time.Second
		if !s.stopped[name] {
			require.NoError(s.t, s.setRenewTime(ctx, name, at))
			continue
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"}}
		require.NoError(s.t, shoot.Client.Delete(ctx, lease))
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](4), RenewTime: ptr.To(metav1.NewMicroTime(at))}}
		require.NoError(s.t, shoot.Client.Create(ctx, lease))
	}
}

// setRenewTime writes a node lease's renewTime, retrying conflicts with the kubelet loop.
func (s *shootNS) setRenewTime(ctx context.Context, name string, at time.Time) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease := &coordinationv1.Lease{}
		if err := shoot.Client.Get(ctx, client.ObjectKey{Namespace: "kube-node-lease", Name: name}, lease); err != nil {
			return err
		}
		lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(at))
		return shoot.Client.Update(ctx, lease)
	})
}

// scaleEvent is a change of a dependent Deployment's replicas, as a watch saw it.
type scaleEvent struct {
	name     string
	replicas int32
	at       time.Time
}

// watchScaling records every change of the dependents' spec.replicas until the test ends.
func (s *shootNS) watchScaling() func() []scaleEvent {
	var mu sync.Mutex
	var events []scaleEvent
	cs, err := kubernetes.NewForConfig(seed.Config)
	require.NoError(s.t, err)
	w, err := cs.AppsV1().Deployments(s.name).Watch(context.Background(), metav1.ListOptions{})
	require.NoError(s.t, err)
	s.t.Cleanup(w.Stop)
	last := map[string]int32{}
	go func() {
		for e := range w.ResultChan() {
			d, ok := e.Object.(*appsv1.Deployment)
			if !ok || e.Type == watch.Deleted || d.Spec.Replicas == nil {
				continue
			}
			mu.Lock()
			if prev, seen := last[d.Name]; !seen || prev != *d.Spec.Replicas {
				if seen {
					events = append(events, scaleEvent{name: d.Name, replicas: *d.Spec.Replicas, at: time.Now()})
				}
				last[d.Name] = *d.Spec.Replicas
			}
			mu.Unlock()
		}
	}()
	return func() []scaleEvent {
		mu.Lock()
		defer mu.Unlock()
		return append([]scaleEvent(nil), events...)
	}
}

// unreachableKubeconfig is a kubeconfig for a server no one listens on.
func unreachableKubeconfig() []byte {
	return kubeconfigFor("https://127.0.0.1:1")
}

// kubeconfigFor is a kubeconfig for an httptest TLS server with a token, verified against
// testServerCA.
func kubeconfigFor(server string) []byte {
	cfg := map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "c",
		"clusters": []any{map[string]any{"name": "c", "cluster": map[string]any{"server": server, "certificate-authority-data": testServerCA()}}},
		"contexts": []any{map[string]any{"name": "c", "context": map[string]any{"cluster": "c", "user": "u"}}},
		"users":    []any{map[string]any{"name": "u", "user": map[string]any{"token": "not-a-real-token"}}},
	}
	data, _ := json.Marshal(cfg)
	return data
}

// testServerCA is, in PEM, the certificate every httptest TLS server serves unless told otherwise: its
// own CA, valid for 127.0.0.1.
var testServerCA = sync.OnceValue(func() []byte {
	server := httptest.NewTLSServer(http.NotFoundHandler())
	defer server.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
})

// awaitSeenRenewing waits until the replica's probe of s has succeeded at three different times
// (dwd_shoot_last_successful_probe_timestamp_seconds moved on twice). The kubelets renew every second,
// as often as the probe runs, so by then the replica has almost surely read the leases before and
// after a renewal, which shows the clocks agree, and finds leases that expire afterwards by their age
// within the stability window: seconds. Otherwise it finds them by observation alone after
// 0.75 × grace (30 s), which the tests' waits for a scale-down (expiryWait) still cover.
func (s *shootNS) awaitSeenRenewing() {
	s.t.Helper()
	last, seen := 0.0, 0
	require.Eventually(s.t, func() bool {
		if v := metricstest.Sum(s.t, "dwd_shoot_last_successful_probe_timestamp_seconds", map[string]string{"namespace": s.name}); v > last {
			last, seen = v, seen+1
		}
		return seen >= 3
	}, 20*time.Second, 50*time.Millisecond, "%s probed successfully three times", s.name)
}
