package weeder

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func waitingStatus(reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: reason},
	}}
}

func TestShouldWeed(t *testing.T) {
	running := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{
		Running: &corev1.ContainerStateRunning{},
	}}
	terminated := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1},
	}}
	crashLooping := waitingStatus("CrashLoopBackOff")
	deleting := metav1.Now()

	tests := []struct {
		name     string
		deletion *metav1.Time
		status   corev1.PodStatus
		wantWeed bool
	}{
		{name: "no statuses"},
		{name: "running", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running}}},
		{name: "container in CrashLoopBackOff", wantWeed: true, status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{running, crashLooping}}},
		{name: "init container in CrashLoopBackOff", wantWeed: true, status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{crashLooping},
			ContainerStatuses:     []corev1.ContainerStatus{waitingStatus("PodInitializing")}}},
		{name: "terminating with CrashLoopBackOff", deletion: &deleting, status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{crashLooping}}},
		{name: "ImagePullBackOff", status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{waitingStatus("ImagePullBackOff")}}},
		{name: "ContainerCreating", status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{waitingStatus("ContainerCreating")}}},
		{name: "terminated", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{terminated}}},
		{name: "last state CrashLoopBackOff but running now", status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}}},
		{name: "ephemeral container in CrashLoopBackOff is not counted", status: corev1.PodStatus{
			ContainerStatuses:          []corev1.ContainerStatus{running},
			EphemeralContainerStatuses: []corev1.ContainerStatus{crashLooping}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--a", Name: "kcm", DeletionTimestamp: tt.deletion},
				Status:     tt.status,
			}
			assert.Equal(t, tt.wantWeed, ShouldWeed(pod))
		})
	}
	t.Run("nil pod", func(t *testing.T) { assert.False(t, ShouldWeed(nil)) })
}
