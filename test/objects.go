package test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// CreateStatefulSet creates a StatefulSet object in ns; nothing runs it, since no controller runs.
func (e *Environment) CreateStatefulSet(t testing.TB, ns, name string, replicas int32) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "dwd", Image: "dwd"}}},
			},
		},
	}
	if err := e.Client.Create(context.Background(), sts); err != nil {
		t.Fatalf("creating statefulset %s/%s: %v", ns, name, err)
	}
	return sts
}

// CreatePod creates a Pod object in ns, controlled by owner when it is not nil; nothing runs it.
func (e *Environment) CreatePod(t testing.TB, ns, name string, owner *appsv1.StatefulSet) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "dwd", Image: "dwd"}}},
	}
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
	}
	if err := e.Client.Create(context.Background(), pod); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return pod
}
