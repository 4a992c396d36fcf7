package main

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
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// departingTimeout bounds the two reads of departing: a graceful stop cannot wait long, and an answer
// that does not come in time is no answer (the share is handed over).
const departingTimeout = 3 * time.Second

// departing returns the sharding Runner's Departing hook for the replica running in pod: whether a
// graceful stop leaves the group for good (true) or restarts (false).
//
// It reads the Pod and the StatefulSet that owns it with a live client, not a cache, since the stop
// must act on the StatefulSet as it is now. It needs, in the Pod's namespace:
//
//	rules:
//	- {apiGroups: [""], resources: [pods], verbs: [get]}
//	- {apiGroups: [apps], resources: [statefulsets], verbs: [get]}
//
// Without them it fails, and the Runner hands the share over.
func departing(c kubernetes.Interface, pod types.NamespacedName) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, departingTimeout)
		defer cancel()
		p, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading pod %s: %w", pod, err)
		}
		owner, err := statefulSetOwner(p)
		if err != nil {
			return false, err
		}
		sts, err := c.AppsV1().StatefulSets(p.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			sts = nil
		} else if err != nil {
			return false, fmt.Errorf("reading statefulset %s/%s: %w", p.Namespace, owner.Name, err)
		}
		return departs(p.Name, owner, sts)
	}
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

// podEvent returns the sharding Runner's Event hook, which records events.k8s.io Events on pod
// through recorder.
func podEvent(recorder recorder.EventRecorder, pod *corev1.ObjectReference) func(eventType, reason, action, message string) {
	return func(eventType, reason, action, message string) {
		recorder.Eventf(pod, nil, eventType, reason, action, "%s", message)
	}
}
