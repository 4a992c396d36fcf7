package scaler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// permanentError is an error that another attempt cannot fix.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// scaleResource waits the job's initial delay, then scales the resource within its timeout, reports the
// outcome and, after a scale-up, waits (best effort) for the ready replicas.
func (s *Scaler) scaleResource(ctx context.Context, j job) error {
	if err := s.sleep(ctx, j.initialDelay()); err != nil {
		return fmt.Errorf("%s: waiting the initial delay: %w", j, err)
	}
	opCtx, cancel := context.WithTimeout(ctx, j.timeout())
	defer cancel()
	out, err := s.scaleWithRetries(opCtx, j)
	if err != nil && ctx.Err() != nil {
		// The flow was cancelled (e.g. a handover): not a result of this resource; the next flow resumes.
		j.log.Info("Scaling cancelled", "err", ctx.Err())
		return fmt.Errorf("%s: %w", j, ctx.Err())
	}
	s.report(j, out, err)
	if err != nil {
		return fmt.Errorf("%s: %w", j, err)
	}
	if out.action == scaled && out.to > 0 {
		s.waitReady(opCtx, j, out.to)
	}
	return nil
}

// scaleWithRetries makes up to maxAttempts attempts, each re-reading the resource, until one succeeds or
// fails permanently.
func (s *Scaler) scaleWithRetries(ctx context.Context, j job) (outcome, error) {
	var progress outcome
	var err error
	for attempt := 1; ; attempt++ {
		var out outcome
		out, err = s.attempt(ctx, j)
		progress = progress.after(out)
		if err == nil || errors.As(err, new(permanentError)) || ctx.Err() != nil {
			return progress, err
		}
		if attempt == maxAttempts {
			return progress, fmt.Errorf("giving up after %d attempts: %w", maxAttempts, err)
		}
		j.log.V(1).Info("Retrying", "attempt", attempt, "err", err)
		if serr := s.sleep(ctx, retryBackoff*time.Duration(attempt)); serr != nil {
			return progress, err
		}
	}
}

// attempt reads the resource and its scale and does what the direction asks.
func (s *Scaler) attempt(ctx context.Context, j job) (outcome, error) {
	obj, err := s.read(ctx, j)
	if err != nil || obj == nil {
		return outcome{detail: "optional resource missing"}, err
	}
	scale := &autoscalingv1.Scale{}
	if err := s.Client.SubResource("scale").Get(ctx, obj, scale); err != nil {
		return outcome{obj: obj}, fmt.Errorf("reading the scale subresource: %w", err)
	}
	if err := s.sameVersion(ctx, j, obj, scale); err != nil {
		return outcome{obj: obj}, err
	}
	if s.ignored(j, obj) {
		return s.ignore(ctx, obj)
	}
	if j.dir == Down {
		return s.down(ctx, obj, scale)
	}
	return s.up(ctx, j, obj, scale)
}

// sameVersion reads obj afresh when its (cached) copy is older than the scale just read, so that its
// annotations belong to the version the writes are locked on.
func (s *Scaler) sameVersion(ctx context.Context, j job, obj client.Object, scale *autoscalingv1.Scale) error {
	if obj.GetResourceVersion() == scale.ResourceVersion {
		return nil
	}
	reader := s.APIReader
	if reader == nil {
		reader = s.Client
	}
	if err := reader.Get(ctx, j.key(), obj); err != nil {
		return fmt.Errorf("reading afresh: %w", err)
	}
	if obj.GetResourceVersion() != scale.ResourceVersion {
		return errors.New("changed while being read")
	}
	return nil
}

// read returns the resource, nil for a missing optional one; a missing required one is a permanent error.
func (s *Scaler) read(ctx context.Context, j job) (client.Object, error) {
	obj, err := newObject(j.info.Ref)
	if err != nil {
		return nil, permanentError{err}
	}
	err = s.Client.Get(ctx, j.key(), obj)
	switch {
	case apierrors.IsNotFound(err) && j.info.Optional:
		j.log.V(1).Info("Optional resource missing, skipping")
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, permanentError{fmt.Errorf("required resource missing: %w", err)}
	case err != nil:
		return nil, fmt.Errorf("reading: %w", err)
	}
	return obj, nil
}

// down records the replicas and the meltdown marker, then sets the replicas to 0. A resource already at
// 0 is left alone, so that its replicas annotation is never overwritten with 0.
func (s *Scaler) down(ctx context.Context, obj client.Object, scale *autoscalingv1.Scale) (outcome, error) {
	from := scale.Spec.Replicas
	if from == 0 {
		return outcome{obj: obj, detail: "already at 0 replicas"}, nil
	}
	marks := map[string]*string{
		ReplicasAnnotation:           ptr.To(strconv.Itoa(int(from))),
		MeltdownProtectionAnnotation: ptr.To(""),
	}
	if err := s.patchAnnotations(ctx, obj, scale.ResourceVersion, marks); err != nil {
		return outcome{obj: obj}, fmt.Errorf("annotating before scaling down: %w", err)
	}
	if err := s.writeReplicas(ctx, obj, scale, obj.GetResourceVersion(), 0); err != nil {
		return outcome{obj: obj}, fmt.Errorf("scaling down: %w", err)
	}
	return outcome{action: scaled, obj: obj, from: from}, nil
}

// up restores the recorded replicas of a resource at 0, then removes the annotations. A resource above 0
// only gets its annotations removed, which finishes a scale-up cut short between its two writes.
func (s *Scaler) up(ctx context.Context, j job, obj client.Object, scale *autoscalingv1.Scale) (outcome, error) {
	if scale.Spec.Replicas > 0 {
		if !marked(obj.GetAnnotations()) {
			return outcome{obj: obj, detail: "already above 0 replicas"}, nil
		}
		if err := s.unmark(ctx, obj, scale.ResourceVersion); err != nil {
			return outcome{obj: obj}, err
		}
		return outcome{action: completed, obj: obj}, nil
	}
	to := s.targetReplicas(j, obj)
	if err := s.writeReplicas(ctx, obj, scale, scale.ResourceVersion, to); err != nil {
		return outcome{obj: obj}, fmt.Errorf("scaling up: %w", err)
	}
	out := outcome{action: scaled, obj: obj, to: to}
	return out, s.unmark(ctx, obj, scale.ResourceVersion)
}

// targetReplicas returns the replicas to restore, reporting an invalid annotation.
func (s *Scaler) targetReplicas(j job, obj client.Object) int32 {
	to, err := TargetReplicas(obj.GetAnnotations())
	if err != nil {
		s.warnAnnotation(j, obj, err)
	}
	return to
}

// ignored tells whether the resource has ignore-scaling set, reporting an invalid value.
func (s *Scaler) ignored(j job, obj client.Object) bool {
	ignore, err := IgnoreScaling(obj.GetAnnotations())
	if err != nil {
		s.warnAnnotation(j, obj, err)
	}
	return ignore
}

// ignore leaves an ignored resource's replicas alone and removes its meltdown marker, if any.
func (s *Scaler) ignore(ctx context.Context, obj client.Object) (outcome, error) {
	out := outcome{obj: obj, detail: "ignore-scaling is set"}
	if _, ok := obj.GetAnnotations()[MeltdownProtectionAnnotation]; !ok {
		return out, nil
	}
	drop := map[string]*string{MeltdownProtectionAnnotation: nil}
	if err := s.patchAnnotations(ctx, obj, obj.GetResourceVersion(), drop); err != nil {
		return out, fmt.Errorf("removing the meltdown annotation of an ignored resource: %w", err)
	}
	return out, nil
}

// unmark removes both scale-down annotations from obj, provided it is still at resourceVersion rv.
//
// The controller of a resource just scaled up writes its status at once, which changes the
// resourceVersion the removal is locked on; so a Conflict is retried on a fresh read of the scale, a
// few times, as long as the resource is still scaled up.
func (s *Scaler) unmark(ctx context.Context, obj client.Object, rv string) error {
	drop := map[string]*string{ReplicasAnnotation: nil, MeltdownProtectionAnnotation: nil}
	for attempt := 1; ; attempt++ {
		err := s.patchAnnotations(ctx, obj, rv, drop)
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == unmarkAttempts {
			return fmt.Errorf("removing the annotations after scaling up: %w", err)
		}
		scale := &autoscalingv1.Scale{}
		if err := s.Client.SubResource("scale").Get(ctx, obj, scale); err != nil {
			return fmt.Errorf("reading the scale to remove the annotations: %w", err)
		}
		if scale.Spec.Replicas == 0 {
			return fmt.Errorf("scaled down again before the annotations were removed: %w", err)
		}
		rv = scale.ResourceVersion
	}
}

// unmarkAttempts bounds the tries to remove the annotations after a scale-up.
const unmarkAttempts = 5

// patchAnnotations applies an annotation patch (see annotationPatch) locked on resourceVersion rv; obj
// then holds the object the API server returned.
func (s *Scaler) patchAnnotations(ctx context.Context, obj client.Object, rv string, annotations map[string]*string) error {
	patch, err := annotationPatch(rv, annotations)
	if err != nil {
		return permanentError{err}
	}
	return s.Client.Patch(ctx, obj, patch)
}

// writeReplicas sets the replicas through the scale subresource, provided the resource is still at
// resourceVersion rv; scale then holds the API server's answer, and obj its new resourceVersion.
func (s *Scaler) writeReplicas(ctx context.Context, obj client.Object, scale *autoscalingv1.Scale, rv string, n int32) error {
	scale.ResourceVersion = rv
	scale.Spec.Replicas = n
	if err := s.Client.SubResource("scale").Update(ctx, obj, client.WithSubResourceBody(scale)); err != nil {
		return err
	}
	obj.SetResourceVersion(scale.ResourceVersion)
	return nil
}
