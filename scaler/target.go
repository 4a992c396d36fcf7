package scaler

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newObject returns an empty object of the kind ref names: a Deployment or a StatefulSet of apps/v1, the
// scale targets the config accepts.
func newObject(ref *autoscalingv1.CrossVersionObjectReference) (client.Object, error) {
	if ref == nil {
		return nil, fmt.Errorf("no ref")
	}
	if ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("unsupported apiVersion %q of %s %s", ref.APIVersion, ref.Kind, ref.Name)
	}
	switch ref.Kind {
	case "Deployment":
		return &appsv1.Deployment{}, nil
	case "StatefulSet":
		return &appsv1.StatefulSet{}, nil
	default:
		return nil, fmt.Errorf("unsupported kind %q of %s", ref.Kind, ref.Name)
	}
}

// specReplicas returns the desired replicas of obj; unset means 1, as the API server defaults it.
func specReplicas(obj client.Object) int32 {
	var replicas *int32
	switch o := obj.(type) {
	case *appsv1.Deployment:
		replicas = o.Spec.Replicas
	case *appsv1.StatefulSet:
		replicas = o.Spec.Replicas
	}
	if replicas == nil {
		return 1
	}
	return *replicas
}

// readyReplicas returns the ready replicas in the status of obj.
func readyReplicas(obj client.Object) int32 {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Status.ReadyReplicas
	case *appsv1.StatefulSet:
		return o.Status.ReadyReplicas
	}
	return 0
}
