package weeder_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/config/configtest"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/replica/replicatest"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/test"
	"github.com/sharded-dwd/dependency-watchdog/weeder"
)

var env *test.Environment

func TestMain(m *testing.M) { os.Exit(test.Main(m, &env)) }

// weederConfig is the original's example with a watch duration short enough for tests.
func weederConfig(t testing.TB, watch time.Duration) *config.WeederConfig {
	t.Helper()
	return configtest.Weeder(t, fmt.Sprintf(`
watchDuration: %s
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors:
      - matchExpressions:
          - {key: gardener.cloud/role, operator: In, values: [controlplane]}
          - {key: role, operator: In, values: [apiserver]}
  kube-apiserver:
    podSelectors:
      - matchExpressions:
          - {key: gardener.cloud/role, operator: In, values: [controlplane]}
          - {key: role, operator: NotIn, values: [main, apiserver]}
`, watch))
}

// replica is a weeder replica of the tests: the in-process replica and its weeder.
type replica struct {
	*replicatest.Replica
	Weeder *weeder.Manager
}

// startReplica runs a weeder replica as member of a group whose leases live in leaseNS.
func startReplica(t testing.TB, leaseNS, member string, cfg *config.WeederConfig, maxWindows int) *replica {
	return startReplicaWith(t, nil, leaseNS, member, weeder.Options{Config: cfg, MaxWindows: maxWindows})
}

// startReplicaClocked is startReplica whose weeder runs on clk, unless it is nil.
func startReplicaClocked(t testing.TB, leaseNS, member string, cfg *config.WeederConfig, maxWindows int, clk clock.WithTicker) *replica {
	return startReplicaWith(t, nil, leaseNS, member, weeder.Options{Config: cfg, MaxWindows: maxWindows, Clock: clk})
}

// startReplicaWith runs a weeder replica of opts whose manager reaches the seed through the config
// through (the test API server when nil); the member's leases go straight to the API server.
func startReplicaWith(t testing.TB, through *rest.Config, leaseNS, member string, opts weeder.Options) *replica {
	byObject, err := weeder.CacheOptions(opts.Config)
	require.NoError(t, err)
	r := &replica{}
	r.Replica = replicatest.Start(t, replicatest.Options{Seed: env.Config, Through: through, Group: "weeders",
		LeaseNamespace: leaseNS, Member: member, Cache: byObject,
		Setup: func(ctx context.Context, mgr manager.Manager, owner sharding.Owner) (err error) {
			opts.Owner = owner
			r.Weeder, err = weeder.Setup(ctx, mgr, opts)
			return err
		}})
	return r
}

// setSlice creates or updates the EndpointSlice of service with one endpoint of the given readiness.
func setSlice(t testing.TB, ns, service string, ready bool) {
	ctx := context.Background()
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: service + "-abcde", Namespace: ns,
		Labels: map[string]string{discoveryv1.LabelServiceName: service}}, AddressType: discoveryv1.AddressTypeIPv4}
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(slice), slice)
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}}
	if apierrors.IsNotFound(err) {
		require.NoError(t, env.Client.Create(ctx, slice))
	} else {
		require.NoError(t, env.Client.Update(ctx, slice))
	}
}

// createPod creates a pod with the given labels whose only container is waiting for reason (empty:
// running).
func createPod(t *testing.T, ns, name string, podLabels map[string]string, reason string) *corev1.Pod {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: podLabels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}}
	require.NoError(t, env.Client.Create(ctx, pod))
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if reason != "" {
		state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: state}}
	require.NoError(t, env.Client.Status().Update(ctx, pod))
	return pod
}

func exists(t *testing.T, pod *corev1.Pod) bool {
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

var (
	apiserverLabels = map[string]string{"gardener.cloud/role": "controlplane", "role": "apiserver"}
	otherLabels     = map[string]string{"app": "something-else"}
)

// TestEtcdTurningReadyWeedsCrashLoopingAPIServers steps the weeder's clock to end the window: a real
// window would have to be short, and a slow machine could end it before the late pod is weeded.
func TestEtcdTurningReadyWeedsCrashLoopingAPIServers(t *testing.T) {
	env.Require(t)
	const watch = time.Minute
	ns := env.Namespace(t)
	setSlice(t, ns, "etcd-main-client", false)
	crashing := []*corev1.Pod{
		createPod(t, ns, "kube-apiserver-0", apiserverLabels, "CrashLoopBackOff"),
		createPod(t, ns, "kube-apiserver-1", apiserverLabels, "CrashLoopBackOff"),
	}
	healthy := createPod(t, ns, "kube-apiserver-2", apiserverLabels, "")
	outside := createPod(t, ns, "other-0", otherLabels, "CrashLoopBackOff")
	clk := clocktesting.NewFakeClock(time.Now())
	r := startReplicaClocked(t, env.Namespace(t), "dwd-0", weederConfig(t, watch), 10, clk)
	require.Eventually(t, func() bool { return r.Owns(ns) }, 20*time.Second, 10*time.Millisecond)
	assert.Never(t, func() bool { return !exists(t, crashing[0]) }, time.Second, 50*time.Millisecond,
		"nothing is weeded while etcd is not ready")

	readyAt := time.Now()
	setSlice(t, ns, "etcd-main-client", true)
	require.Eventually(t, func() bool { return !exists(t, crashing[0]) || !exists(t, crashing[1]) }, 10*time.Second, 5*time.Millisecond)
	t.Logf("slice turned ready → first pod deleted: %s", time.Since(readyAt).Round(time.Millisecond))
	require.Eventually(t, func() bool { return !exists(t, crashing[0]) && !exists(t, crashing[1]) }, 10*time.Second, 20*time.Millisecond)
	assert.True(t, exists(t, healthy), "a healthy pod is left alone")
	assert.True(t, exists(t, outside), "a pod outside the selector is left alone")

	// A pod that starts crash-looping while the window is open is weeded too.
	late := createPod(t, ns, "kube-apiserver-3", apiserverLabels, "CrashLoopBackOff")
	require.Eventually(t, func() bool { return !exists(t, late) }, 5*time.Second, 20*time.Millisecond)

	// After the window has ended, nothing is deleted any more.
	assert.Len(t, windowsIn(r, ns), 1, "the window is open until its watch duration has passed")
	clk.Step(watch)
	require.Eventually(t, func() bool { return len(windowsIn(r, ns)) == 0 }, 10*time.Second, 50*time.Millisecond)
	afterWindow := createPod(t, ns, "kube-apiserver-4", apiserverLabels, "CrashLoopBackOff")
	assert.Never(t, func() bool { return !exists(t, afterWindow) }, 2*time.Second, 50*time.Millisecond)

	// A slice that stays ready opens nothing new.
	setSlice(t, ns, "etcd-main-client", true)
	assert.Never(t, func() bool { return len(windowsIn(r, ns)) > 0 || !exists(t, afterWindow) }, 2*time.Second, 50*time.Millisecond)
}

// TestWindowCapHoldsAcrossNamespaces steps the weeder's clock: a queued window's time runs while it
// waits, so windows opened at one instant would leave the queued ones only the milliseconds between
// their deadlines, and those are dropped or end before their first list. Its service is its own, so
// that the ready services other tests leave behind open no windows here.
func TestWindowCapHoldsAcrossNamespaces(t *testing.T) {
	env.Require(t)
	const watch = time.Minute
	namespaces := make([]string, 5)
	pods := make([]*corev1.Pod, 5)
	for i := range namespaces {
		namespaces[i] = env.Namespace(t)
	}
	service := "etcd-" + namespaces[0]
	for i, ns := range namespaces {
		setSlice(t, ns, service, false)
		pods[i] = createPod(t, ns, "kube-apiserver-0", apiserverLabels, "CrashLoopBackOff")
	}
	clk := clocktesting.NewFakeClock(time.Now())
	r := startReplicaClocked(t, env.Namespace(t), "dwd-0", serviceConfig(t, watch, service), 2, clk)
	for _, ns := range namespaces {
		require.Eventually(t, func() bool { return r.Owns(ns) }, 20*time.Second, 10*time.Millisecond)
	}
	peak := 0
	deleted := func(which ...int) func() bool {
		return func() bool {
			peak = max(peak, len(r.Weeder.Running()))
			for _, i := range which {
				if exists(t, pods[i]) {
					return false
				}
			}
			return true
		}
	}
	// Windows 0 and 1 run; 2 and 3 queue 10 s later, 4 another 10 s later.
	for i, wave := range [][]int{{0, 1}, {2, 3}, {4}} {
		for _, n := range wave {
			setSlice(t, namespaces[n], service, true)
		}
		if i == 0 {
			require.Eventually(t, deleted(0, 1), 10*time.Second, 10*time.Millisecond)
		} else {
			queued := float64(len(wave) + 2*(i-1))
			require.Eventually(t, func() bool { return metricstest.Sum(t, "dwd_weeder_windows_queued", nil) == queued }, 10*time.Second, 10*time.Millisecond)
		}
		clk.Step(10 * time.Second)
	}
	assert.True(t, exists(t, pods[2]) && exists(t, pods[3]) && exists(t, pods[4]), "queued windows wait")

	clk.Step(watch - 30*time.Second) // windows 0 and 1 end; 2 and 3 start
	require.Eventually(t, deleted(2, 3), 10*time.Second, 10*time.Millisecond, "queued windows run once a slot is free")
	assert.True(t, exists(t, pods[4]))
	clk.Step(10 * time.Second) // windows 2 and 3 end; 4 starts
	require.Eventually(t, deleted(4), 10*time.Second, 10*time.Millisecond)
	assert.LessOrEqual(t, peak, 2, "at most 2 windows run at once")
}

// serviceConfig weeds the API server pods when service turns ready.
func serviceConfig(t testing.TB, watch time.Duration, service string) *config.WeederConfig {
	t.Helper()
	return configtest.Weeder(t, fmt.Sprintf(`
watchDuration: %s
servicesAndDependantSelectors:
  %s:
    podSelectors:
      - matchLabels: {role: apiserver}
`, watch, service))
}

func TestWindowMovesWithItsPartition(t *testing.T) {
	env.Require(t)
	leaseNS := env.Namespace(t)
	cfg := weederConfig(t, time.Minute)
	a := startReplica(t, leaseNS, "dwd-0", cfg, 10)
	ns := env.Namespace(t)
	setSlice(t, ns, "etcd-main-client", false)
	setSlice(t, ns, "etcd-main-client", true)
	require.Eventually(t, func() bool { return len(windowsIn(a, ns)) == 1 }, 10*time.Second, 20*time.Millisecond)
	window := windowsIn(a, ns)[0]
	assert.Equal(t, weeder.ServiceKey{Namespace: ns, Service: "etcd-main-client"}, window.Key)

	b := startReplica(t, leaseNS, "dwd-1", cfg, 10)
	a.Stop() // graceful: the window travels in the partition lease
	require.Eventually(t, func() bool { return len(windowsIn(b, ns)) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the other replica resumes the window")
	assert.True(t, window.Deadline.Equal(windowsIn(b, ns)[0].Deadline), "for its remaining time, not a new one")
	pod := createPod(t, ns, "kube-apiserver-0", apiserverLabels, "CrashLoopBackOff")
	require.Eventually(t, func() bool { return !exists(t, pod) }, 10*time.Second, 20*time.Millisecond,
		"and weeds in it")
}

func TestReadyServicesGetWindowsWhenAPartitionComesWithoutHandover(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	setSlice(t, ns, "kube-apiserver", true)
	pod := createPod(t, ns, "kube-controller-manager-0", map[string]string{"gardener.cloud/role": "controlplane", "role": "controller-manager"}, "CrashLoopBackOff")
	// The first replica of a group takes every partition fresh, as a replica does after a crash: it
	// opens windows for the services that are ready, as the original does on every restart.
	r := startReplica(t, env.Namespace(t), "dwd-0", weederConfig(t, time.Minute), 10)
	require.Eventually(t, func() bool { return !exists(t, pod) }, 10*time.Second, 20*time.Millisecond)
	assert.Len(t, windowsIn(r, ns), 1)
}

// windowsIn returns a replica's running windows in one namespace: namespaces of earlier tests linger
// in the test API server (no namespace controller deletes their contents), with their ready services.
func windowsIn(r *replica, ns string) []weeder.Window {
	var in []weeder.Window
	for _, w := range r.Weeder.Running() {
		if w.Key.Namespace == ns {
			in = append(in, w)
		}
	}
	return in
}
