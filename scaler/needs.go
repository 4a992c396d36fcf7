package scaler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// NeedsScaling tells, from reads through Client (which the prober backs with a cache, so this costs the
// API server nothing), whether a flow in direction dir would write anything in namespace:
//   - Down: a resource that is not ignored has replicas above 0;
//   - Up: a resource that is not ignored has 0 replicas (the original's rule), or still carries the
//     meltdown annotation (a flow cut short, or a manual scale-up while scaled down); a lone replicas
//     annotation on a running resource does not count, see Needs.Cleanup;
//   - either: an ignored resource still carries the meltdown annotation, which a flow removes;
//   - either: a required resource is missing, so that the flow runs and reports the failure.
//
// Missing optional resources do not count.
func (s *Scaler) NeedsScaling(ctx context.Context, namespace string, dir Direction) (bool, error) {
	return s.anyCached(ctx, namespace, func(info config.DependentResourceInfo, obj client.Object) bool {
		return needsScaling(dir, info, obj)
	})
}

// Melted tells whether a resource of namespace carries the meltdown marker: a scale-down took it
// to 0 and no scale-up has run since. It reads the cache, as NeedsScaling does.
func (s *Scaler) Melted(ctx context.Context, namespace string) (bool, error) {
	return s.anyCached(ctx, namespace, func(_ config.DependentResourceInfo, obj client.Object) bool {
		return obj != nil && melted(obj.GetAnnotations())
	})
}

// Needs is what a namespace needs in one direction, from one read of each resource: Scaling as
// NeedsScaling reports it; Cleanup (for Up only) whether a resource above 0 replicas carries a lone
// replicas annotation: what the original dependency-watchdog leaves after every scale-up, so that
// after a cut-over from it a shoot it once scaled down needs a cleanup, not a scale-up flow. Ignored
// resources do not count.
type Needs struct {
	Scaling, Cleanup bool
}

// NeedsOf reports NeedsScaling and, for Up, Needs.Cleanup, reading each resource once.
func (s *Scaler) NeedsOf(ctx context.Context, namespace string, dir Direction) (Needs, error) {
	var n Needs
	_, err := s.anyCached(ctx, namespace, func(info config.DependentResourceInfo, obj client.Object) bool {
		n.Scaling = n.Scaling || needsScaling(dir, info, obj)
		n.Cleanup = n.Cleanup || (dir == Up && obj != nil && leftover(specReplicas(obj), obj.GetAnnotations()))
		return n.Scaling && (n.Cleanup || dir != Up)
	})
	return n, err
}

func needsScaling(dir Direction, info config.DependentResourceInfo, obj client.Object) bool {
	if obj == nil {
		return !info.Optional
	}
	return decide(dir, specReplicas(obj), obj.GetAnnotations()).writes()
}

// anyCached tells whether pred holds for one of the resources in namespace, read through Client (nil
// for a missing one). pred only reads: a cache hands it its own copy, not a deep copy (a healthy
// probe reads every dependent once).
func (s *Scaler) anyCached(ctx context.Context, namespace string,
	pred func(config.DependentResourceInfo, client.Object) bool) (bool, error) {
	for _, info := range s.Resources {
		j := job{namespace: namespace, info: info}
		obj, err := s.read(ctx, s.Client, j, client.UnsafeDisableDeepCopy)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("%s: %w", j, err)
		}
		if pred(info, obj) {
			return true, nil
		}
	}
	return false, nil
}
