package weeder

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

func TestRewatchDelay(t *testing.T) {
	tests := []struct {
		name             string
		previous, lasted time.Duration
		want             time.Duration
	}{
		{"first retry", 0, 0, rewatchBaseDelay},
		{"first retry after a long watch", 0, time.Hour, rewatchBaseDelay},
		{"failing again doubles", rewatchBaseDelay, time.Millisecond, 2 * rewatchBaseDelay},
		{"and again", 4 * rewatchBaseDelay, time.Second, 8 * rewatchBaseDelay},
		{"up to the cap", 20 * time.Second, time.Second, rewatchMaxDelay},
		{"and stays there", rewatchMaxDelay, time.Second, rewatchMaxDelay},
		{"a watch that ran long was healthy: start over", rewatchMaxDelay, rewatchMaxDelay, rewatchBaseDelay},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, rewatchDelay(tt.previous, tt.lasted))
		})
	}
}

// podWatchFixture is a weeder Manager on a fake clientset whose pod lists and watches the test drives.
type podWatchFixture struct {
	m       *Manager
	clock   *clocktesting.FakeClock
	lists   atomic.Int32
	listErr atomic.Bool // lists fail while set
	watches chan *watch.FakeWatcher
	deleted chan metav1.DeleteOptions // of each delete, with its pod's name in the preconditions' place
	names   chan string
	own     *ownershipStub
	// deleteErr, when set, answers the deletes instead of the fake clientset.
	deleteErr func(name string) error
}

func newPodWatchFixture() *podWatchFixture {
	f := &podWatchFixture{clock: clocktesting.NewFakeClock(time.Now()), watches: make(chan *watch.FakeWatcher, 4),
		deleted: make(chan metav1.DeleteOptions, 4), names: make(chan string, 4), own: &ownershipStub{}}
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		f.lists.Add(1)
		if f.listErr.Load() {
			return true, nil, errors.New("list failed")
		}
		return true, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
	})
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		f.watches <- w
		return true, w, nil
	})
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		del := a.(k8stesting.DeleteAction)
		f.names <- del.GetName()
		f.deleted <- del.GetDeleteOptions()
		if f.deleteErr != nil {
			return true, nil, f.deleteErr(del.GetName())
		}
		return true, nil, nil
	})
	recorder := events.NewFakeRecorder(10)
	recorder.Verbose = true // with the action
	f.m = &Manager{Client: client, Clock: f.clock, Log: logr.Discard(), Recorder: recorder, Ownership: f.own}
	return f
}

// start runs watchPods until the returned stop is called, which waits for it to return.
func (f *podWatchFixture) start(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.m.watchPods(ctx, ServiceKey{Namespace: "shoot--a", Service: "etcd-main-client"}, labels.Everything())
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("watchPods did not return after its window's context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

func (f *podWatchFixture) nextWatch(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-f.watches:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("no pod watch was opened")
		return nil
	}
}

// requireDeleted requires that the next delete request is for the pod name, and returns its options.
func (f *podWatchFixture) requireDeleted(t *testing.T, name string) metav1.DeleteOptions {
	t.Helper()
	select {
	case got := <-f.names:
		assert.Equal(t, name, got)
		return <-f.deleted
	case <-time.After(10 * time.Second):
		t.Fatalf("pod %s was not deleted", name)
		return metav1.DeleteOptions{}
	}
}

func crashLoopingPod(name, resourceVersion string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shoot--a", UID: types.UID("uid-" + name), ResourceVersion: resourceVersion},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waitingStatus("CrashLoopBackOff")}},
	}
}

func TestWatchPodsReopensAWatchClosedByGone(t *testing.T) {
	f := newPodWatchFixture()
	f.start(t)
	first := f.nextWatch(t)
	first.Add(crashLoopingPod("before", "2"))
	f.requireDeleted(t, "before")

	// A 410 Gone ends a RetryWatcher for good; the window is still open.
	first.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired})
	require.Eventually(t, f.clock.HasWaiters, 10*time.Second, time.Millisecond, "the next round waits for its back-off")
	assert.Equal(t, int32(1), f.lists.Load(), "no re-list before the back-off has passed")

	f.clock.Step(rewatchMaxDelay)
	second := f.nextWatch(t)
	assert.Equal(t, int32(2), f.lists.Load(), "re-listed before watching again")
	second.Add(crashLoopingPod("after", "3"))
	f.requireDeleted(t, "after")
}

func TestWatchPodsBacksOffUntilTheWindowEnds(t *testing.T) {
	f := newPodWatchFixture()
	f.listErr.Store(true)
	stop := f.start(t)
	for round := int32(1); round <= 3; round++ {
		require.Eventually(t, f.clock.HasWaiters, 10*time.Second, time.Millisecond)
		assert.Equal(t, round, f.lists.Load(), "one list per back-off")
		f.clock.Step(rewatchMaxDelay)
		require.Eventually(t, func() bool { return f.lists.Load() == round+1 }, 10*time.Second, time.Millisecond)
	}
	require.Eventually(t, f.clock.HasWaiters, 10*time.Second, time.Millisecond)
	stop() // ends the back-off without the clock moving
	assert.Equal(t, int32(4), f.lists.Load())
}

func TestWeedDeletesOnlyThePodAsObserved(t *testing.T) {
	f := newPodWatchFixture()
	f.start(t)
	pod := crashLoopingPod("kube-apiserver-0", "42")
	f.nextWatch(t).Add(pod)

	options := f.requireDeleted(t, pod.Name)

	require.NotNil(t, options.Preconditions)
	assert.Equal(t, ptr.To(pod.UID), options.Preconditions.UID, "not a replacement with the same name")
	assert.Equal(t, ptr.To("42"), options.Preconditions.ResourceVersion, "not a pod that changed since, e.g. recovered")
	assert.Equal(t, 1, f.own.guardCalls(), "the delete was guarded")
	select {
	case e := <-f.m.Recorder.(*events.FakeRecorder).Events:
		assert.Equal(t, "Normal CrashLoopingPodDeleted Delete Deleted: stuck in CrashLoopBackOff while its dependency, service etcd-main-client, is ready again", e)
	case <-time.After(10 * time.Second):
		t.Fatal("no Event on the deleted pod within 10s")
	}
}

func TestWeedSendsNoDeleteTheGuardRefuses(t *testing.T) {
	f := newPodWatchFixture()
	f.own.refusals = []error{fmt.Errorf("%w: acting on shoot--a", sharding.ErrFenced), nil}
	f.start(t)
	w := f.nextWatch(t)
	w.Add(crashLoopingPod("refused", "2"))
	w.Add(crashLoopingPod("allowed", "3"))

	f.requireDeleted(t, "allowed") // the events are weeded in order: "refused" would come first
	assert.Equal(t, 2, f.own.guardCalls())
}

func TestWeedCountsAConflictApartFromFailures(t *testing.T) {
	f := newPodWatchFixture()
	f.deleteErr = func(name string) error {
		return apierrors.NewConflict(corev1.Resource("pods"), name, errors.New("the ResourceVersion in the precondition does not match"))
	}
	conflicts := counterValue(t, deleteConflicts.WithLabelValues("etcd-main-client"))
	failures := counterValue(t, deleteFailures.WithLabelValues("etcd-main-client"))
	f.start(t)
	f.nextWatch(t).Add(crashLoopingPod("changed", "2"))
	f.requireDeleted(t, "changed")

	require.Eventually(t, func() bool {
		return counterValue(t, deleteConflicts.WithLabelValues("etcd-main-client")) == conflicts+1
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, failures, counterValue(t, deleteFailures.WithLabelValues("etcd-main-client")), "not a failure")
	assert.Empty(t, f.m.Recorder.(*events.FakeRecorder).Events, "nor worth an Event")
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// TestWeedTriesAFailedDeleteAgain: a delete refused for a reason that may pass (here a 503; in the
// Gardener story the client's rate limiter, which could not send it before the fence) is sent again,
// guarded anew, while the window is open; a pod in CrashLoopBackOff may not change for minutes, so the
// watch would not report it again.
func TestWeedTriesAFailedDeleteAgain(t *testing.T) {
	f := newPodWatchFixture()
	var calls atomic.Int32
	f.deleteErr = func(name string) error {
		if calls.Add(1) == 1 {
			return apierrors.NewServiceUnavailable("etcd is busy")
		}
		return nil
	}
	deleted := counterValue(t, podsDeleted.WithLabelValues("etcd-main-client"))
	failures := counterValue(t, deleteFailures.WithLabelValues("etcd-main-client"))
	f.start(t)
	f.nextWatch(t).Add(crashLoopingPod("flaky", "2"))
	f.requireDeleted(t, "flaky")

	require.Eventually(t, f.clock.HasWaiters, 10*time.Second, time.Millisecond, "waits before the second attempt")
	f.clock.Step(deleteRetryDelays[0])
	f.requireDeleted(t, "flaky")
	require.Eventually(t, func() bool {
		return counterValue(t, podsDeleted.WithLabelValues("etcd-main-client")) == deleted+1
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, failures, counterValue(t, deleteFailures.WithLabelValues("etcd-main-client")), "no failure: the second attempt passed")
	assert.Equal(t, 2, f.own.guardCalls(), "each attempt is guarded")
}

func TestWeedGivesUpAfterItsAttemptsAndNeverRetriesARefusal(t *testing.T) {
	t.Run("always unavailable: every attempt, then one failure", func(t *testing.T) {
		f := newPodWatchFixture()
		f.deleteErr = func(string) error { return apierrors.NewServiceUnavailable("down") }
		failures := counterValue(t, deleteFailures.WithLabelValues("etcd-main-client"))
		f.start(t)
		f.nextWatch(t).Add(crashLoopingPod("down", "2"))
		for _, delay := range deleteRetryDelays {
			f.requireDeleted(t, "down")
			require.Eventually(t, f.clock.HasWaiters, 10*time.Second, time.Millisecond)
			f.clock.Step(delay)
		}
		f.requireDeleted(t, "down")
		require.Eventually(t, func() bool {
			return counterValue(t, deleteFailures.WithLabelValues("etcd-main-client")) == failures+1
		}, 10*time.Second, time.Millisecond)
		assert.Equal(t, len(deleteRetryDelays)+1, f.own.guardCalls())
	})
	t.Run("forbidden: one attempt", func(t *testing.T) {
		f := newPodWatchFixture()
		f.deleteErr = func(name string) error {
			return apierrors.NewForbidden(corev1.Resource("pods"), name, errors.New("no"))
		}
		failures := counterValue(t, deleteFailures.WithLabelValues("etcd-main-client"))
		f.start(t)
		w := f.nextWatch(t)
		w.Add(crashLoopingPod("refused", "2"))
		f.requireDeleted(t, "refused")
		require.Eventually(t, func() bool {
			return counterValue(t, deleteFailures.WithLabelValues("etcd-main-client")) == failures+1
		}, 10*time.Second, time.Millisecond)
		w.Add(crashLoopingPod("next", "3"))
		f.requireDeleted(t, "next") // not the refused pod again
		assert.False(t, f.clock.HasWaiters(), "no retry is waiting")
	})
}
