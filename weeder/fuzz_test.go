package weeder

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/internal/fuzzinput"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

// The fuzz targets of the weeder's window decisions; run one with e.g.
// go test -run='^$' -fuzz='^FuzzWeedWatched$' -fuzztime=60s ./weeder.

// fuzzOwnership plays sharding.Ownership for the fuzz targets: it lets every write through unless
// refuse is set, and counts the guards.
type fuzzOwnership struct {
	refuse bool
	guards int
}

func (o *fuzzOwnership) Owns(string) bool { return !o.refuse }

func (o *fuzzOwnership) Partition(string) int { return 0 }

func (o *fuzzOwnership) Guard(ctx context.Context, _ string) (context.Context, context.CancelFunc, error) {
	o.guards++
	if o.refuse {
		return ctx, func() {}, fmt.Errorf("not the owner")
	}
	guarded, cancel := context.WithCancel(ctx)
	return guarded, cancel, nil
}

// fuzzWaitingReasons are the waiting reasons of the pod input: the one that counts, near misses, and
// other reasons; index len() is the free-form reason of the fuzz input.
var fuzzWaitingReasons = []string{reasonCrashLoopBackOff, "crashloopbackoff", "CrashLoopBackOff ", "ImagePullBackOff",
	"ErrImagePull", "ContainerCreating", "CreateContainerConfigError", ""}

// fuzzEventTypes are the watch event types of the input.
var fuzzEventTypes = []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error}

// FuzzWeedWatched feeds the watch events of a weeding window, built from the input, to weedWatched on
// a fake clientset and checks that
//   - nothing panics, whatever the pods' statuses (no statuses, states without details, any reason);
//   - a pod is deleted exactly when an Added or Modified event shows it not terminating with a
//     container or an init container waiting with reason CrashLoopBackOff, that exact word: a pod not
//     in CrashLoopBackOff (only its ephemeral containers, its last state, or a terminated state with
//     that reason; a reason in another case) is never chosen, nor a terminating one;
//   - every delete is guarded and names the pod's UID, and its resourceVersion when it has one, as
//     preconditions: a pod changed since it was seen is not deleted by the API server;
//   - a replica that may not act on the namespace deletes nothing;
//   - the pods are not changed.
//
// Deletes fail, if at all, with errors that are not retried (NotFound, Conflict, Forbidden): a retry
// waits on the clock, which is the window's own matter.
func FuzzWeedWatched(f *testing.F) {
	f.Add([]byte{}, "")
	// Added: a pod in CrashLoopBackOff; Modified: one in ImagePullBackOff whose last state was
	// CrashLoopBackOff; Added: a terminating pod in CrashLoopBackOff.
	f.Add([]byte{0, 0, 3,
		0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0,
		1, 1, 1, 0, 1, 3, 0, 1, 0, 0, 0, 0,
		0, 2, 2, 3, 2, 1, 0, 0, 0, 0, 0}, "")
	// Deletes conflict. Modified: an init container in CrashLoopBackOff; Added: a container terminated
	// with that reason and an ephemeral one in it; Deleted: a pod in CrashLoopBackOff.
	f.Add([]byte{0, 2, 3,
		1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0,
		0, 1, 1, 1, 5, 1, 0, 2, 0, 0, 1, 0, 0, 0,
		2, 0, 0, 0, 1, 0, 0, 0, 0, 0}, "")
	// A replica that may not act, and a pod in CrashLoopBackOff.
	f.Add([]byte{1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, "")
	// A waiting reason of the fuzz input.
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0, 1, 8, 0, 0, 0, 0}, "CrashLoopBackOff\x00")
	f.Fuzz(func(t *testing.T, data []byte, reason string) {
		in := fuzzinput.Input(data)
		own := &fuzzOwnership{refuse: in.Bit()}
		deleteErr := in.Pick(4)
		evs := weedEvents(&in, reason)
		before := make([]watch.Event, len(evs))
		for i, e := range evs {
			before[i] = watch.Event{Type: e.Type, Object: e.Object.DeepCopyObject()}
		}

		var deletes []k8stesting.DeleteAction
		client := fake.NewClientset()
		client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			deletes = append(deletes, a.(k8stesting.DeleteAction))
			return true, nil, weedDeleteError(deleteErr, a.(k8stesting.DeleteAction).GetName())
		})
		m := &Manager{Client: client, Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard(),
			Recorder: &events.FakeRecorder{}, Ownership: own}
		ch := make(chan watch.Event, len(evs))
		for _, e := range evs {
			ch <- e
		}
		close(ch)
		m.weedWatched(context.Background(), ServiceKey{Namespace: "shoot--p--s", Service: "etcd-main-client"}, ch)

		require.Equal(t, before, evs, "the pods were changed")
		var want []*corev1.Pod
		for _, e := range evs {
			if pod, ok := e.Object.(*corev1.Pod); ok && (e.Type == watch.Added || e.Type == watch.Modified) && crashLooping(pod) {
				want = append(want, pod)
			}
		}
		if own.refuse {
			require.Empty(t, deletes, "deleted without the right to act")
			return
		}
		require.Equal(t, len(want), own.guards, "a delete without its guard, or a guard without a delete")
		require.Len(t, deletes, len(want))
		for i, pod := range want {
			checkDelete(t, deletes[i], pod)
		}
	})
	require.False(f, ShouldWeed(nil))
}

// crashLooping is ShouldWeed's rule, stated on its own: not terminating, and a container or an init
// container waiting with reason CrashLoopBackOff.
func crashLooping(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, s := range statuses {
			if s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" {
				return true
			}
		}
	}
	return false
}

// checkDelete requires the delete to name pod and to be conditioned on the pod as observed.
func checkDelete(t *testing.T, del k8stesting.DeleteAction, pod *corev1.Pod) {
	t.Helper()
	require.Equal(t, pod.Namespace, del.GetNamespace())
	require.Equal(t, pod.Name, del.GetName())
	pre := del.GetDeleteOptions().Preconditions
	require.NotNil(t, pre, "a delete without preconditions")
	require.NotNil(t, pre.UID, "a delete without a UID precondition")
	require.Equal(t, pod.UID, *pre.UID)
	if pod.ResourceVersion == "" {
		require.Nil(t, pre.ResourceVersion)
	} else {
		require.NotNil(t, pre.ResourceVersion, "a delete without a resourceVersion precondition")
		require.Equal(t, pod.ResourceVersion, *pre.ResourceVersion)
	}
}

// weedDeleteError is the answer to a delete: none, or one that is not retried.
func weedDeleteError(kind int, name string) error {
	gr := schema.GroupResource{Resource: "pods"}
	switch kind {
	case 1:
		return apierrors.NewNotFound(gr, name)
	case 2:
		return apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified"))
	case 3:
		return apierrors.NewForbidden(gr, name, fmt.Errorf("no"))
	}
	return nil
}

// weedEvents builds up to 16 watch events from in; reason is the free-form waiting reason.
func weedEvents(in *fuzzinput.Input, reason string) []watch.Event {
	evs := make([]watch.Event, in.Pick(17))
	for i := range evs {
		typ := fuzzEventTypes[in.Pick(len(fuzzEventTypes))]
		if typ == watch.Error {
			evs[i] = watch.Event{Type: typ, Object: &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}}
			continue
		}
		evs[i] = watch.Event{Type: typ, Object: fuzzPod(in, reason)}
	}
	return evs
}

// fuzzPod builds a pod from in: one of four names and three UIDs, with or without a resourceVersion,
// terminating or not, with up to three statuses of each kind of container.
func fuzzPod(in *fuzzinput.Input, reason string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: fmt.Sprintf("etcd-%d", in.Pick(4)),
		UID: types.UID(fmt.Sprint(in.Pick(3)))}}
	flags := in.Byte()
	if flags&1 != 0 {
		pod.ResourceVersion = fmt.Sprint(in.Pick(8))
	}
	if flags&2 != 0 {
		pod.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	pod.Status.ContainerStatuses = fuzzStatuses(in, reason)
	pod.Status.InitContainerStatuses = fuzzStatuses(in, reason)
	for _, s := range fuzzStatuses(in, reason) {
		pod.Status.EphemeralContainerStatuses = append(pod.Status.EphemeralContainerStatuses, s)
	}
	return pod
}

// fuzzStatuses builds up to three container statuses from in, each in one state (or none) and with
// or without a last state.
func fuzzStatuses(in *fuzzinput.Input, reason string) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for i := range in.Pick(4) {
		s := corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i), State: fuzzState(in, reason)}
		if in.Bit() {
			s.LastTerminationState = fuzzState(in, reason)
		}
		out = append(out, s)
	}
	return out
}

// fuzzState builds one container state: waiting, running, terminated, all of them or none.
func fuzzState(in *fuzzinput.Input, reason string) corev1.ContainerState {
	r := reason
	if n := in.Pick(len(fuzzWaitingReasons) + 1); n < len(fuzzWaitingReasons) {
		r = fuzzWaitingReasons[n]
	}
	switch in.Pick(5) {
	case 0:
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: r}}
	case 1:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	case 2:
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: r, ExitCode: 1}}
	case 3:
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: r}, Running: &corev1.ContainerStateRunning{},
			Terminated: &corev1.ContainerStateTerminated{Reason: r}}
	}
	return corev1.ContainerState{}
}

// FuzzPodSelector checks the selection of a window's pods: a pod selector that the weeder accepts
// (metav1.LabelSelectorAsSelector, as newManager converts it) is sent to the API server as its
// String(), which must parse back to a selector that chooses exactly the same pods. Selector and pod
// labels come from a small vocabulary of keys and values, so that they meet, plus the fuzz strings.
func FuzzPodSelector(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0}, "etcd", "main")
	f.Add([]byte{1, 1, 2, 0, 1, 1, 1, 2, 3, 2, 0, 0, 0, 0, 2}, "app", "x,y")
	f.Add([]byte{2, 2, 0, 3, 1, 1, 0, 3, 2, 1, 0}, "gardener.cloud/role", "")
	f.Add([]byte{0, 1, 0, 0, 3, 4}, "a b", "!=")
	f.Fuzz(func(t *testing.T, data []byte, key, value string) {
		in := fuzzinput.Input(data)
		keys := []string{"role", "app.kubernetes.io/name", "gardener.cloud/role", key}
		values := []string{"etcd", "main", "", value}
		s := fuzzSelector(&in, keys, values)
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			return // newManager refuses it
		}
		parsed, err := labels.Parse(sel.String())
		require.NoError(t, err, "the selector sent does not parse: %q", sel.String())
		for range 4 {
			set := labels.Set{}
			for range in.Pick(4) {
				set[keys[in.Pick(len(keys))]] = values[in.Pick(len(values))]
			}
			require.Equal(t, sel.Matches(set), parsed.Matches(set), "selector %q on %v", sel.String(), set)
		}
	})
}

// fuzzSelector builds a pod selector from in, with match labels and expressions of every operator
// (and a wrong one).
func fuzzSelector(in *fuzzinput.Input, keys, values []string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{}
	for range in.Pick(3) {
		if s.MatchLabels == nil {
			s.MatchLabels = map[string]string{}
		}
		s.MatchLabels[keys[in.Pick(len(keys))]] = values[in.Pick(len(values))]
	}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists,
		metav1.LabelSelectorOpDoesNotExist, metav1.LabelSelectorOperator(selection.Equals)}
	for range in.Pick(3) {
		r := metav1.LabelSelectorRequirement{Key: keys[in.Pick(len(keys))], Operator: ops[in.Pick(len(ops))]}
		for range in.Pick(3) {
			r.Values = append(r.Values, values[in.Pick(len(values))])
		}
		s.MatchExpressions = append(s.MatchExpressions, r)
	}
	return s
}
