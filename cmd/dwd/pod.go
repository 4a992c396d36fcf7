package main

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// podEvent returns the sharding Runner's Event hook, which records events.k8s.io Events on pod
// through recorder.
func podEvent(recorder recorder.EventRecorder, pod *corev1.ObjectReference) func(eventType, reason, action, message string) {
	return func(eventType, reason, action, message string) {
		recorder.Eventf(pod, nil, eventType, reason, action, "%s", message)
	}
}
