package weeder_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestPodThatChangedSinceItWasSeenCrashLoopingIsNotDeleted(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	setSlice(t, ns, "etcd-main-client", false)
	pod := createPod(t, ns, "kube-apiserver-0", apiserverLabels, "CrashLoopBackOff")
	recovers := &recoverBeforeDelete{path: "/api/v1/namespaces/" + ns + "/pods/" + pod.Name, change: func() { recoverPod(t, pod) }}
	r := startReplicaThrough(t, recovers.config(env.Config), env.Namespace(t), "dwd-0", weederConfig(t, time.Minute))
	require.Eventually(t, func() bool { return r.Owns(ns) }, 20*time.Second, 10*time.Millisecond)

	setSlice(t, ns, "etcd-main-client", true)

	require.Eventually(t, func() bool { return recovers.answer() != 0 }, 10*time.Second, 10*time.Millisecond,
		"the window saw the pod in CrashLoopBackOff and sent its delete")
	assert.Equal(t, http.StatusConflict, recovers.answer(), "the pod changed after it was seen: the precondition fails")
	assert.True(t, exists(t, pod), "the recovered pod stays")
	assert.Len(t, windowsIn(r, ns), 1, "and the window goes on")
}

// recoverPod makes pod's container run, as the kubelet reports a restart that worked. It runs in the
// weeder's goroutine, so it only reports failures.
func recoverPod(t *testing.T, pod *corev1.Pod) {
	ctx := context.Background()
	current := &corev1.Pod{}
	if !assert.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(pod), current)) {
		return
	}
	current.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	assert.NoError(t, env.Client.Status().Update(ctx, current))
}

// recoverBeforeDelete stands between a client and the API server: the first DELETE of path runs
// change before it is sent, and its answer's status code is kept.
type recoverBeforeDelete struct {
	path   string
	change func()

	mu     sync.Mutex
	status int
}

func (d *recoverBeforeDelete) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) { return d.roundTrip(next, req) })
	})
	return cfg
}

func (d *recoverBeforeDelete) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodDelete || req.URL.Path != d.path {
		return next.RoundTrip(req)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.status == 0 {
		d.change()
	}
	resp, err := next.RoundTrip(req)
	if err == nil && d.status == 0 {
		d.status = resp.StatusCode
	}
	return resp, err
}

// answer returns the status code of the first DELETE, 0 before it was answered.
func (d *recoverBeforeDelete) answer() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
