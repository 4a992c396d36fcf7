package scaler

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cleanup removes the leftover replicas annotations (Needs.Cleanup), one precondition-guarded patch per resource, through the
// Limiter and the Guard; no delays, no Events beyond a log line. A write the Guard refuses ends it,
// with an error wrapping ErrRefused. Each patch is bounded by the resource's scale-up timeout. A
// resource that changed since the cache read fails with Conflict and is left for the next
// Cleanup, which decides on the newer copy.
func (s *Scaler) Cleanup(ctx context.Context, namespace string) error {
	log := s.logger(ctx).WithValues("namespace", namespace)
	var errs []error
	for _, info := range s.Resources {
		j := newJob(log, namespace, info, Up, Reason{})
		err := s.cleanup(ctx, j)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", j, err))
		}
		if errors.Is(err, ErrRefused) {
			logRefused(j.log, err)
			break // the Guard would refuse the next resource's write too
		}
	}
	return errors.Join(errs...)
}

// cleanup removes the leftover replicas annotation of one resource, if it has one.
func (s *Scaler) cleanup(ctx context.Context, j job) error {
	obj, err := s.read(ctx, s.Client, j)
	if err != nil || obj == nil || !leftover(specReplicas(obj), obj.GetAnnotations()) {
		return client.IgnoreNotFound(err)
	}
	d := decision{annotations: map[string]*string{ReplicasAnnotation: nil}}
	patch, err := d.patch(obj.GetResourceVersion())
	if err != nil {
		return err
	}
	if err := s.waitBudget(ctx, Up, 1); err != nil {
		return fmt.Errorf("waiting for the scale budget: %w", err)
	}
	deadline := s.clock().Now().Add(j.timeout()) // after the wait for the budget: it is no slowness
	send := s.guarded(j, s.patcher(obj, patch, Up))
	if err := s.request(ctx, deadline, send); err != nil {
		return fmt.Errorf("removing the leftover replicas annotation: %w", err)
	}
	j.log.Info("Removed a leftover replicas annotation")
	return nil
}
