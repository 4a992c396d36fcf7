package scaler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// NeedsScaling tells, from reads through Client (which the prober backs with a cache, so this costs the
// API server nothing), whether a flow in direction dir would change anything in namespace:
//   - Down: a resource that is not ignored has replicas above 0;
//   - Up: a resource that is not ignored has 0 replicas (the original's rule), or still carries a
//     scale-down annotation (a scale-up cut short before it removed them);
//   - either: an ignored resource still carries the meltdown annotation, which a flow removes;
//   - either: a required resource is missing, so that the flow runs and reports the failure.
//
// Missing optional resources do not count.
func (s *Scaler) NeedsScaling(ctx context.Context, namespace string, dir Direction) (bool, error) {
	for _, info := range s.Resources {
		needs, err := s.needsScaling(ctx, namespace, info, dir)
		if err != nil || needs {
			return needs, err
		}
	}
	return false, nil
}

// needsScaling applies the rules of NeedsScaling to one resource.
func (s *Scaler) needsScaling(ctx context.Context, namespace string, info config.DependentResourceInfo, dir Direction) (bool, error) {
	j := job{namespace: namespace, info: info, dir: dir}
	obj, err := newObject(info.Ref)
	if err != nil {
		return false, err
	}
	if err := s.Client.Get(ctx, j.key(), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return !info.Optional, nil
		}
		return false, fmt.Errorf("reading %s: %w", j, err)
	}
	annotations := obj.GetAnnotations()
	if ignore, _ := IgnoreScaling(annotations); ignore {
		_, meltdown := annotations[MeltdownProtectionAnnotation]
		return meltdown, nil
	}
	if dir == Down {
		return specReplicas(obj) > 0, nil
	}
	return specReplicas(obj) == 0 || marked(annotations), nil
}
