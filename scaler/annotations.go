package scaler

import (
	"fmt"
	"strconv"
)

// The annotations on the scaled resources, with the keys of the original dependency-watchdog.
const (
	// ReplicasAnnotation holds the replicas a resource had before a scale-down; a scale-up restores them.
	ReplicasAnnotation = "dependency-watchdog.gardener.cloud/replicas"
	// MeltdownProtectionAnnotation (empty value) marks a resource that a scale-down has taken to 0;
	// Gardener reads it. A successful scale-up removes it.
	MeltdownProtectionAnnotation = "dependency-watchdog.gardener.cloud/meltdown-protection-active"
	// IgnoreScalingAnnotation, when it parses as true (strconv.ParseBool), excludes a resource from scaling.
	IgnoreScalingAnnotation = "dependency-watchdog.gardener.cloud/ignore-scaling"
)

// DefaultReplicas is the scale-up target of a resource without a valid ReplicasAnnotation.
const DefaultReplicas int32 = 1

// MaxRestoreReplicas bounds the replicas a scale-up restores from ReplicasAnnotation. The control-plane
// components the watchdog scales run a few replicas; a larger value is damaged or tampered with, and
// restoring it would start a storm of pods on the seed.
const MaxRestoreReplicas int32 = 50

// IgnoreScaling tells whether annotations exclude the resource from scaling. A value that does not parse
// as a bool does not exclude it (as in the original) and is returned as an error to report.
func IgnoreScaling(annotations map[string]string) (bool, error) {
	v, ok := annotations[IgnoreScalingAnnotation]
	if !ok {
		return false, nil
	}
	ignore, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("annotation %s=%q is not a bool, scaling the resource", IgnoreScalingAnnotation, v)
	}
	return ignore, nil
}

// TargetReplicas returns the replicas a scale-up restores: the value of ReplicasAnnotation, or
// DefaultReplicas when it is absent (the caller reports that, see EventMissingAnnotation). A value that
// is not an integer in [1, MaxRestoreReplicas] also gives DefaultReplicas, with an error to report: a
// scale-up is the recovery path, and leaving a control-plane component at 0 because of a damaged
// annotation would prolong the outage it is meant to end.
func TargetReplicas(annotations map[string]string) (int32, error) {
	v, ok := annotations[ReplicasAnnotation]
	if !ok {
		return DefaultReplicas, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		return DefaultReplicas, fmt.Errorf("annotation %s=%q is not an integer above 0, scaling to %d",
			ReplicasAnnotation, v, DefaultReplicas)
	}
	if n > int64(MaxRestoreReplicas) {
		return DefaultReplicas, fmt.Errorf("annotation %s=%q is above the bound of %d replicas, scaling to %d",
			ReplicasAnnotation, v, MaxRestoreReplicas, DefaultReplicas)
	}
	return int32(n), nil
}

// melted tells whether annotations hold the meltdown marker.
func melted(annotations map[string]string) bool {
	_, ok := annotations[MeltdownProtectionAnnotation]
	return ok
}

// leftover tells whether a resource at replicas with annotations carries a lone ReplicasAnnotation
// while running: what the original dependency-watchdog leaves after every scale-up (it removes only the
// meltdown marker). Ignored resources keep theirs: ignore-scaling takes them out of the watchdog's hands.
func leftover(replicas int32, annotations map[string]string) bool {
	_, recorded := annotations[ReplicasAnnotation]
	ignore, _ := IgnoreScaling(annotations)
	return replicas > 0 && recorded && !melted(annotations) && !ignore
}
