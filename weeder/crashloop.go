package weeder

import corev1 "k8s.io/api/core/v1"

// reasonCrashLoopBackOff is the waiting reason the kubelet reports for a container it holds back
// after repeated crashes.
const reasonCrashLoopBackOff = "CrashLoopBackOff"

// ShouldWeed reports whether pod should be deleted so that it restarts now: it is not already
// terminating (no deletionTimestamp) and a container or an init container is waiting with reason
// CrashLoopBackOff.
//
// Ephemeral (debug) containers are not counted: the kubelet never restarts them, and deleting a
// workload pod because a debugging session's container failed would only take the workload down.
func ShouldWeed(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	return anyCrashLooping(pod.Status.ContainerStatuses) || anyCrashLooping(pod.Status.InitContainerStatuses)
}

// anyCrashLooping reports whether any of the statuses is waiting with reason CrashLoopBackOff.
func anyCrashLooping(statuses []corev1.ContainerStatus) bool {
	for i := range statuses {
		if waiting := statuses[i].State.Waiting; waiting != nil && waiting.Reason == reasonCrashLoopBackOff {
			return true
		}
	}
	return false
}
