package scaler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The reasons of the Events on the scaled resources.
const (
	// EventScaledDown (Normal): a resource was scaled down to 0.
	EventScaledDown = "ScaledDown"
	// EventScaledUp (Normal): a resource was scaled back up.
	EventScaledUp = "ScaledUp"
	// EventScaleFailed (Warning): scaling a resource failed; the flow stopped at its level.
	EventScaleFailed = "ScaleFailed"
	// EventInvalidAnnotation (Warning): an annotation could not be parsed; the message says what was done.
	EventInvalidAnnotation = "InvalidAnnotation"
)

// report logs the outcome of a resource's operation, counts it and records its Event.
func (s *Scaler) report(j job, out outcome, err error) {
	if err != nil {
		scaleOperations.WithLabelValues(j.dir.String(), resultFailed).Inc()
		j.log.Error(err, "Scaling failed")
		s.event(s.eventTarget(j, out), corev1.EventTypeWarning, EventScaleFailed,
			"Scale-%s failed: %v. Flow reason: %s", j.dir, err, j.why)
		return
	}
	scaleOperations.WithLabelValues(j.dir.String(), out.result()).Inc()
	switch {
	case out.action == scaled && j.dir == Down:
		j.log.Info("Scaled down", "from", out.from)
		s.event(out.obj, corev1.EventTypeNormal, EventScaledDown,
			"Scaled down from %d to 0 replicas: %s", out.from, j.why)
	case out.action == scaled:
		j.log.Info("Scaled up", "to", out.to)
		s.event(out.obj, corev1.EventTypeNormal, EventScaledUp,
			"Scaled up from 0 to %d replicas: %s", out.to, j.why)
	case out.action == completed:
		j.log.Info("Removed the annotations left by an interrupted scale-up")
	default:
		j.log.V(1).Info("Nothing to scale", "detail", out.detail)
	}
}

// eventTarget returns the object a failure Event is about: the resource as read, or a stand-in with its
// name when it could not be read.
func (s *Scaler) eventTarget(j job, out outcome) client.Object {
	if out.obj != nil {
		return out.obj
	}
	obj, err := newObject(j.info.Ref)
	if err != nil {
		return nil
	}
	obj.SetNamespace(j.namespace)
	obj.SetName(j.name())
	return obj
}

// warnAnnotation logs an invalid annotation and records a Warning Event.
func (s *Scaler) warnAnnotation(j job, obj client.Object, err error) {
	j.log.Info("Invalid annotation", "err", err.Error())
	s.event(obj, corev1.EventTypeWarning, EventInvalidAnnotation, "%v", err)
}

// event records an Event on obj when there is a Recorder and an object.
func (s *Scaler) event(obj client.Object, eventType, reason, format string, args ...any) {
	if s.Recorder == nil || obj == nil {
		return
	}
	s.Recorder.Eventf(obj, eventType, reason, format, args...)
}

// waitReady polls the resource until it has want ready replicas or ctx ends (the rest of the resource's
// timeout). It is best effort: it never fails the flow, since without a running controller (or with pods
// that do not start) the replicas may never become ready, and the next level must not wait forever.
func (s *Scaler) waitReady(ctx context.Context, j job, want int32) {
	obj, err := newObject(j.info.Ref)
	if err != nil {
		return
	}
	ticker := s.clock().NewTicker(readyPollInterval)
	defer ticker.Stop()
	for {
		err := s.Client.Get(ctx, j.key(), obj)
		if err == nil && readyReplicas(obj) >= want {
			j.log.V(1).Info("Replicas ready", "ready", readyReplicas(obj))
			return
		}
		select {
		case <-ctx.Done():
			j.log.Info("Gave up waiting for ready replicas", "want", want, "ready", readyReplicas(obj))
			return
		case <-ticker.C():
		}
	}
}
