package scaler

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/types"
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

// annotationPatch is a JSON merge patch that sets the annotations with a value and removes those with nil,
// applied only while the object is at resourceVersion rv. It names every key it touches, unlike a patch
// computed as the difference from a (possibly stale, cached) object.
func annotationPatch(rv string, annotations map[string]*string) (client.Patch, error) {
	data, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv, "annotations": annotations},
	})
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.MergePatchType, data), nil
}
