package config

import (
	"fmt"
	"slices"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// scaleTargetGroupVersion is the only API version of the supported scale targets.
var scaleTargetGroupVersion = schema.GroupVersion{Group: "apps", Version: "v1"}

// scaleTargetKinds are the kinds, with a scale subresource, that the prober
// scales. Deployment is the one Gardener configures.
var scaleTargetKinds = []string{"Deployment", "StatefulSet"}

// ValidateProberConfig returns every problem of a defaulted c, each with its
// field path. A nil c is one Required error.
func ValidateProberConfig(c *ProberConfig) field.ErrorList {
	if c == nil {
		return field.ErrorList{field.Required(documentPath(), "a prober config is required")}
	}
	var errs field.ErrorList
	errs = append(errs, validateSubdomainName(c.KubeConfigSecretName, field.NewPath("kubeConfigSecretName"))...)
	errs = append(errs, validateDuration(c.ProbeInterval, probeIntervalRange, field.NewPath("probeInterval"))...)
	errs = append(errs, validateDuration(c.InitialDelay, delayRange, field.NewPath("initialDelay"))...)
	errs = append(errs, validateDuration(c.ProbeTimeout, probeTimeoutRange, field.NewPath("probeTimeout"))...)
	errs = append(errs, validateJitterFactor(c.BackoffJitterFactor, field.NewPath("backoffJitterFactor"))...)
	errs = append(errs, validateDuration(c.KCMNodeMonitorGraceDuration, graceRange, field.NewPath("kcmNodeMonitorGraceDuration"))...)
	errs = append(errs, validateFailureFraction(c.NodeLeaseFailureFraction, field.NewPath("nodeLeaseFailureFraction"))...)
	return append(errs, validateDependentResourceInfos(c.DependentResourceInfos, field.NewPath("dependentResourceInfos"))...)
}

// validateFailureFraction requires f to be a fraction in
// [minNodeLeaseFailureFraction, 1].
func validateFailureFraction(f *float64, p *field.Path) field.ErrorList {
	if errs := validateFraction(f, p); len(errs) > 0 {
		return errs
	}
	if *f < minNodeLeaseFailureFraction {
		return field.ErrorList{field.Invalid(p, *f, fmt.Sprintf("must be at least %g: below, a minority of nodes "+
			"losing their leases scales the control plane down, and a single lease not judged yet blocks the "+
			"scale-up of a small shoot (Gardener ships 0.6)", minNodeLeaseFailureFraction))}
	}
	return nil
}

// refKey identifies the resource a ref names, whatever its API version.
type refKey struct {
	gk   schema.GroupKind
	name string
}

// validateDependentResourceInfos requires at least one entry, validates each,
// and reports a ref naming the same resource as an earlier one as Duplicate.
func validateDependentResourceInfos(infos []DependentResourceInfo, p *field.Path) field.ErrorList {
	if len(infos) == 0 {
		return field.ErrorList{field.Required(p, "at least one resource to scale is required")}
	}
	var errs field.ErrorList
	seen := make(map[refKey]bool, len(infos))
	for i := range infos {
		ip := p.Index(i)
		errs = append(errs, validateDependentResourceInfo(&infos[i], ip)...)
		if key, ok := keyOf(infos[i].Ref); ok {
			if seen[key] {
				errs = append(errs, field.Duplicate(ip.Child("ref"), *infos[i].Ref))
			}
			seen[key] = true
		}
	}
	return errs
}

// keyOf returns the key of ref; ok is false when ref is too incomplete to
// name a resource, which validateRef reports.
func keyOf(ref *autoscalingv1.CrossVersionObjectReference) (key refKey, ok bool) {
	if ref == nil || ref.Kind == "" || ref.Name == "" {
		return refKey{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return refKey{}, false
	}
	return refKey{gk: gv.WithKind(ref.Kind).GroupKind(), name: ref.Name}, true
}

// validateDependentResourceInfo validates one entry of dependentResourceInfos.
func validateDependentResourceInfo(info *DependentResourceInfo, p *field.Path) field.ErrorList {
	errs := validateRef(info.Ref, p.Child("ref"))
	errs = append(errs, validateScaleInfo(info.ScaleUp, p.Child("scaleUp"))...)
	return append(errs, validateScaleInfo(info.ScaleDown, p.Child("scaleDown"))...)
}

// validateRef requires a complete ref naming a supported scale target.
func validateRef(ref *autoscalingv1.CrossVersionObjectReference, p *field.Path) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if ref.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	}
	errs = append(errs, validateSubdomainName(ref.Name, p.Child("name"))...)
	if ref.APIVersion == "" {
		return append(errs, field.Required(p.Child("apiVersion"), ""))
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return append(errs, field.Invalid(p.Child("apiVersion"), ref.APIVersion, err.Error()))
	}
	if ref.Kind != "" {
		errs = append(errs, validateScaleTarget(ref, gv, p)...)
	}
	return errs
}

// validateScaleTarget reports a kind or an API version that the prober cannot scale.
func validateScaleTarget(ref *autoscalingv1.CrossVersionObjectReference, gv schema.GroupVersion, p *field.Path) field.ErrorList {
	if !slices.Contains(scaleTargetKinds, ref.Kind) {
		return field.ErrorList{field.NotSupported(p.Child("kind"), ref.Kind, scaleTargetKinds)}
	}
	if gv != scaleTargetGroupVersion {
		return field.ErrorList{field.NotSupported(p.Child("apiVersion"), ref.APIVersion,
			[]string{scaleTargetGroupVersion.String()})}
	}
	return nil
}

// validateScaleInfo requires s and checks its level, delay and timeout.
func validateScaleInfo(s *ScaleInfo, p *field.Path) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if s.Level < 0 {
		errs = append(errs, field.Invalid(p.Child("level"), s.Level, "must not be negative"))
	}
	errs = append(errs, validateDuration(s.InitialDelay, delayRange, p.Child("initialDelay"))...)
	return append(errs, validateDuration(s.Timeout, scaleTimeoutRange, p.Child("timeout"))...)
}
