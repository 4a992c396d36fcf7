package sharding

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// statefulSetTimeout bounds the reads of one answer of StatefulSetPod: a graceful stop cannot wait
// long, nor can a reconcile, and an answer that does not come in time is no answer.
const statefulSetTimeout = 3 * time.Second

// StatefulSetPod answers the Runner's questions about members that are the Pods of one StatefulSet,
// member name = Pod name: whether this replica's graceful stop leaves the group for good (Departing),
// and whether a member away on a returning leave will not be back within its grace (WontReturn).
//
// It reads Pods and the StatefulSet with a live client, not a cache, since a stop and the end of a
// reservation must act on them as they are now. It needs, in the Pod's namespace:
//
//	rules:
//	- {apiGroups: [""], resources: [pods], verbs: [get]}
//	- {apiGroups: [apps], resources: [statefulsets], verbs: [get]}
//
// Without them its answers fail: a stop hands the share over, and a reservation lasts its grace.
type StatefulSetPod struct {
	Client kubernetes.Interface
	// Pod is this replica's Pod.
	Pod types.NamespacedName
}

// Departing reports whether this replica's graceful stop leaves the group for good (true: a
// scale-down, or the StatefulSet is going away) or restarts (false).
func (s StatefulSetPod) Departing(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, statefulSetTimeout)
	defer cancel()
	sts, owner, err := s.statefulSet(ctx)
	if err != nil {
		return false, err
	}
	return departs(s.Pod.Name, owner, sts)
}

// WontReturn reports whether member, a Pod of this replica's StatefulSet that stopped to restart,
// will not be back within its grace: a scale-down decided after its stop has left its ordinal outside
// the StatefulSet's range, the StatefulSet is going away, or its new Pod cannot be scheduled or
// cannot pull its image (docs/sharding.md, "Graceful stops"). A Pod not created yet, or still
// terminating, is no such sign: a rolling update replaces it within seconds.
func (s StatefulSetPod) WontReturn(ctx context.Context, member string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, statefulSetTimeout)
	defer cancel()
	sts, owner, err := s.statefulSet(ctx)
	if err != nil {
		return false, err
	}
	if gone, err := departs(member, owner, sts); err != nil || gone {
		return gone, err
	}
	pod, err := s.Client.CoreV1().Pods(s.Pod.Namespace).Get(ctx, member, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading pod %s/%s: %w", s.Pod.Namespace, member, err)
	}
	return pod.DeletionTimestamp == nil && stuck(pod), nil
}

// stuck reports whether a new Pod cannot start: the scheduler found no node for it, or a container's
// image cannot be pulled.
func stuck(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" || w.Reason == "InvalidImageName") {
			return true
		}
	}
	return false
}

// statefulSet reads this replica's Pod and the StatefulSet that controls it (nil when it is gone).
func (s StatefulSetPod) statefulSet(ctx context.Context) (*appsv1.StatefulSet, metav1.OwnerReference, error) {
	p, err := s.Client.CoreV1().Pods(s.Pod.Namespace).Get(ctx, s.Pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, metav1.OwnerReference{}, fmt.Errorf("reading pod %s: %w", s.Pod, err)
	}
	owner, err := statefulSetOwner(p)
	if err != nil {
		return nil, owner, err
	}
	sts, err := s.Client.AppsV1().StatefulSets(p.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, owner, nil
	}
	if err != nil {
		return nil, owner, fmt.Errorf("reading statefulset %s/%s: %w", p.Namespace, owner.Name, err)
	}
	return sts, owner, nil
}

// statefulSetOwner returns the reference to the StatefulSet that controls pod.
func statefulSetOwner(pod *corev1.Pod) (metav1.OwnerReference, error) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "StatefulSet" || !strings.HasPrefix(owner.APIVersion, appsv1.GroupName+"/") {
		return metav1.OwnerReference{}, fmt.Errorf("pod %s/%s is not controlled by a StatefulSet", pod.Namespace, pod.Name)
	}
	return *owner, nil
}

// departs decides whether the pod named podName, controlled through owner by sts (nil when it is
// gone), leaves the group for good: when its StatefulSet is gone, replaced or being deleted, or when a
// scale-down has left its ordinal outside the StatefulSet's range. Otherwise it restarts (a rolling
// update, an eviction, a pod deleted by an operator) and comes back under the same name.
func departs(podName string, owner metav1.OwnerReference, sts *appsv1.StatefulSet) (bool, error) {
	ordinal, err := podOrdinal(podName)
	if err != nil {
		return false, err
	}
	if sts == nil || sts.UID != owner.UID || sts.DeletionTimestamp != nil {
		return true, nil
	}
	start, replicas := int64(0), int64(1) // the API server's default for replicas
	if sts.Spec.Ordinals != nil {
		start = int64(sts.Spec.Ordinals.Start)
	}
	if sts.Spec.Replicas != nil {
		replicas = int64(*sts.Spec.Replicas)
	}
	return ordinal < start || ordinal >= start+replicas, nil
}

// podOrdinal returns the ordinal of a StatefulSet pod: the number after the last '-' of its name.
func podOrdinal(name string) (int64, error) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return 0, fmt.Errorf("pod name %q has no ordinal after its last '-'", name)
	}
	ordinal, err := strconv.ParseUint(name[i+1:], 10, 31)
	if err != nil {
		return 0, fmt.Errorf("pod name %q has no ordinal after its last '-'", name)
	}
	return int64(ordinal), nil
}
