package scaler

import (
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
	// EventInvalidAnnotation (Warning): an annotation could not be parsed or is out of bounds; the
	// message says what was done.
	EventInvalidAnnotation = "InvalidAnnotation"
	// EventMissingAnnotation (Warning): a resource at 0 replicas had no replicas annotation when it was
	// scaled up, so DefaultReplicas were restored.
	EventMissingAnnotation = "MissingAnnotation"
)

// EventAction is the action of every Event of the Scaler (events.k8s.io/v1 requires one).
const EventAction = "Scale"

// report logs the outcome of a resource's operation, counts it and records its Events.
func (s *Scaler) report(j job, out outcome, err error) {
	for _, w := range out.warnings {
		s.warn(j, out.obj, w)
	}
	if err != nil {
		scaleOperations.WithLabelValues(j.dir.String(), j.name(), resultFailed).Inc()
		j.log.Error(err, "Scaling failed")
		s.event(s.eventTarget(j, out), corev1.EventTypeWarning, EventScaleFailed,
			"Scale-%s failed: %v. Flow reason: %s", j.dir, err, j.why)
		return
	}
	scaleOperations.WithLabelValues(j.dir.String(), j.name(), out.result()).Inc()
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
		j.log.Info("Removed the annotations of an interrupted flow")
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

// warn logs an annotation problem and records a Warning Event with its reason.
func (s *Scaler) warn(j job, obj client.Object, w warning) {
	j.log.Info("Annotation problem", "reason", w.reason, "detail", w.err.Error())
	s.event(obj, corev1.EventTypeWarning, w.reason, "%v", w.err)
}

// event records an Event on obj when there is a Recorder and an object.
func (s *Scaler) event(obj client.Object, eventType, reason, format string, args ...any) {
	if s.Recorder == nil || obj == nil {
		return
	}
	s.Recorder.Eventf(obj, nil, eventType, reason, EventAction, format, args...)
}
