package sharding

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodOrdinal(t *testing.T) {
	tests := []struct {
		name    string
		want    int64
		wantErr bool
	}{
		{"dwd-0", 0, false},
		{"dwd-prober-12", 12, false},
		{"a-b-c-2147483647", 1<<31 - 1, false},
		{"dwd", 0, true},
		{"dwd-", 0, true},
		{"dwd-x", 0, true},
		{"dwd-+1", 0, true},
		{"dwd-1a", 0, true},
		{"dwd-2147483648", 0, true},
		{"dwd-0-canary", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := podOrdinal(tt.name)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDeparts(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "dwd", UID: "sts-uid", Controller: ptr.To(true)}
	sts := func(mutate func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "dwd", UID: "sts-uid"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
		mutate(s)
		return s
	}
	keep := func(*appsv1.StatefulSet) {}
	tests := []struct {
		name    string
		pod     string
		sts     *appsv1.StatefulSet
		want    bool
		wantErr bool
	}{
		{"first pod, rolling update", "dwd-0", sts(keep), false, false},
		{"last pod within replicas", "dwd-2", sts(keep), false, false},
		{"scaled down below the pod", "dwd-2", sts(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](2) }), true, false},
		{"scaled to zero", "dwd-0", sts(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](0) }), true, false},
		{"replicas unset means one", "dwd-0", sts(func(s *appsv1.StatefulSet) { s.Spec.Replicas = nil }), false, false},
		{"replicas unset, second pod", "dwd-1", sts(func(s *appsv1.StatefulSet) { s.Spec.Replicas = nil }), true, false},
		{"start ordinal, in range", "dwd-7", sts(func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }), false, false},
		{"start ordinal, past the range", "dwd-8", sts(func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }), true, false},
		{"start ordinal, below the range", "dwd-4", sts(func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }), true, false},
		{"statefulset gone", "dwd-0", nil, true, false},
		{"statefulset being deleted", "dwd-0", sts(func(s *appsv1.StatefulSet) { s.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), true, false},
		{"statefulset replaced under the same name", "dwd-0", sts(func(s *appsv1.StatefulSet) { s.UID = "other-uid" }), true, false},
		{"no ordinal", "dwd", sts(keep), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := departs(tt.pod, owner, tt.sts)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestStatefulSetOwner(t *testing.T) {
	ref := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "dwd", UID: "uid", Controller: ptr.To(controller)}
	}
	tests := []struct {
		name    string
		owners  []metav1.OwnerReference
		wantErr bool
	}{
		{"statefulset", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", true)}, false},
		{"statefulset after another owner", []metav1.OwnerReference{ref("v1", "ConfigMap", false), ref("apps/v1", "StatefulSet", true)}, false},
		{"no owner", nil, true},
		{"replicaset", []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", true)}, true},
		{"statefulset, not the controller", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", false)}, true},
		{"a StatefulSet of another group", []metav1.OwnerReference{ref("apps.kruise.io/v1beta1", "StatefulSet", true)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dwd-0", OwnerReferences: tt.owners}}
			got, err := statefulSetOwner(pod)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, ref("apps/v1", "StatefulSet", true), got)
		})
	}
}

func TestStuck(t *testing.T) {
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	scheduled := func(status corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodScheduled, Status: status, Reason: reason}
	}
	tests := []struct {
		name   string
		status corev1.PodStatus
		want   bool
	}{
		{"new, not tried yet", corev1.PodStatus{}, false},
		{"unschedulable", corev1.PodStatus{Conditions: []corev1.PodCondition{scheduled(corev1.ConditionFalse, corev1.PodReasonUnschedulable)}}, true},
		{"scheduling gated", corev1.PodStatus{Conditions: []corev1.PodCondition{scheduled(corev1.ConditionFalse, corev1.PodReasonSchedulingGated)}}, false},
		{"scheduled", corev1.PodStatus{Conditions: []corev1.PodCondition{scheduled(corev1.ConditionTrue, "")}}, false},
		{"pulling", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ContainerCreating")}}, false},
		{"image pull back-off", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ImagePullBackOff")}}, true},
		{"image pull error", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ErrImagePull")}}, true},
		{"invalid image name", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("InvalidImageName")}}, true},
		{"running", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, stuck(&corev1.Pod{Status: tt.status}))
		})
	}
}
