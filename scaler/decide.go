package scaler

import (
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// decision is what a flow does to one resource, decided from its replicas and annotations alone. It is
// written as one patch (see patch), so the replicas and the annotations change together or not at all.
type decision struct {
	action      action
	replicas    *int32             // the replicas to write; nil leaves them
	annotations map[string]*string // the annotations to set (a value) or remove (nil)
	from, to    int32              // the replicas before and after, when scaled
	detail      string             // what is done or why nothing is
	// settle tells whether the ready replicas are awaited after the write: down to 0 after a scale-down
	// (or when already at 0), up to `to` after a scale-up.
	settle   bool
	warnings []warning // annotations to report
}

// warning is an annotation problem to report as a Warning Event with reason.
type warning struct {
	reason string
	err    error
}

// decide returns what a flow in direction dir does to a resource with replicas and annotations:
//   - ignore-scaling set: only remove the meltdown marker, if any;
//   - Down, above 0: set 0 and record the replicas and the meltdown marker; at 0: nothing, so that the
//     replicas annotation is never overwritten with 0;
//   - Up, at 0: restore the recorded replicas (see restoreTarget) and remove both annotations; above 0
//     with the meltdown marker: remove both annotations (a flow cut short, or a manual scale-up); else
//     nothing. A lone replicas annotation on a running resource is for Cleanup.
func decide(dir Direction, replicas int32, annotations map[string]string) decision {
	var warnings []warning
	ignore, err := IgnoreScaling(annotations)
	if err != nil {
		warnings = append(warnings, warning{EventInvalidAnnotation, err})
	}
	var d decision
	switch {
	case ignore:
		d = decideIgnored(annotations)
	case dir == Down:
		d = decideDown(replicas)
	default:
		d = decideUp(replicas, annotations)
	}
	d.warnings = append(warnings, d.warnings...)
	return d
}

func decideIgnored(annotations map[string]string) decision {
	d := decision{detail: "ignore-scaling is set"}
	if melted(annotations) {
		d.annotations = map[string]*string{MeltdownProtectionAnnotation: nil}
		d.detail = "ignore-scaling is set, removing the meltdown annotation"
	}
	return d
}

func decideDown(replicas int32) decision {
	if replicas == 0 {
		return decision{detail: "already at 0 replicas", settle: true}
	}
	return decision{action: scaled, replicas: ptr.To[int32](0), from: replicas, settle: true,
		annotations: map[string]*string{
			ReplicasAnnotation:           ptr.To(strconv.Itoa(int(replicas))),
			MeltdownProtectionAnnotation: ptr.To(""),
		}}
}

func decideUp(replicas int32, annotations map[string]string) decision {
	unmark := map[string]*string{ReplicasAnnotation: nil, MeltdownProtectionAnnotation: nil}
	if replicas > 0 {
		if !melted(annotations) {
			return decision{detail: "already above 0 replicas"}
		}
		return decision{action: completed, annotations: unmark, detail: "removing the annotations of an interrupted flow"}
	}
	to, warnings := restoreTarget(annotations)
	return decision{action: scaled, replicas: ptr.To(to), to: to, annotations: unmark, settle: true, warnings: warnings}
}

// restoreTarget returns the replicas a scale-up restores (see TargetReplicas), with a warning when the
// replicas annotation is missing or invalid.
func restoreTarget(annotations map[string]string) (int32, []warning) {
	if _, ok := annotations[ReplicasAnnotation]; !ok {
		return DefaultReplicas, []warning{{EventMissingAnnotation, fmt.Errorf(
			"annotation %s is missing, the replicas before the scale-down are unknown, scaling to %d",
			ReplicasAnnotation, DefaultReplicas)}}
	}
	to, err := TargetReplicas(annotations)
	if err != nil {
		return to, []warning{{EventInvalidAnnotation, err}}
	}
	return to, nil
}

// writes tells whether d changes the resource.
func (d decision) writes() bool {
	return d.replicas != nil || len(d.annotations) > 0
}

// patch is the JSON merge patch of d on the resource itself, applied only while it is at resourceVersion
// rv. It names every key it touches, unlike a patch computed as the difference from a (possibly stale,
// cached) object.
func (d decision) patch(rv string) (client.Patch, error) {
	metadata := map[string]any{"resourceVersion": rv}
	if len(d.annotations) > 0 { // a null would remove every annotation
		metadata["annotations"] = d.annotations
	}
	body := map[string]any{"metadata": metadata}
	if d.replicas != nil {
		body["spec"] = map[string]any{"replicas": *d.replicas}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.MergePatchType, data), nil
}
