package config

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateWeederConfig returns every problem of a defaulted c, each with its
// field path, services in sorted order. A nil c is one Required error.
func ValidateWeederConfig(c *WeederConfig) field.ErrorList {
	if c == nil {
		return field.ErrorList{field.Required(documentPath(), "a weeder config is required")}
	}
	errs := validateDuration(c.WatchDuration, watchDurationRange, field.NewPath("watchDuration"))
	return append(errs, validateServices(c.ServicesAndDependantSelectors, field.NewPath("servicesAndDependantSelectors"))...)
}

// validateServices requires at least one service, each a valid Service name
// with valid pod selectors.
func validateServices(services map[string]DependantSelectors, p *field.Path) field.ErrorList {
	if len(services) == 0 {
		return field.ErrorList{field.Required(p, "at least one service is required")}
	}
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(services)) {
		sp := p.Key(name)
		errs = append(errs, requireValidName(name, validation.IsDNS1035Label, sp)...)
		errs = append(errs, validatePodSelectors(services[name].PodSelectors, sp.Child("podSelectors"))...)
	}
	return errs
}

// validatePodSelectors requires at least one selector, each valid.
func validatePodSelectors(selectors []*metav1.LabelSelector, p *field.Path) field.ErrorList {
	if len(selectors) == 0 {
		return field.ErrorList{field.Required(p, "at least one pod selector is required")}
	}
	var errs field.ErrorList
	for i, s := range selectors {
		errs = append(errs, validatePodSelector(s, p.Index(i))...)
	}
	return errs
}

// validatePodSelector requires s to be set and to convert to a labels.Selector.
// The syntax check names the offending part of s; the conversion is checked
// after it, so that a problem is not reported twice.
func validatePodSelector(s *metav1.LabelSelector, p *field.Path) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	opts := metav1validation.LabelSelectorValidationOptions{}
	if errs := metav1validation.ValidateLabelSelector(s, opts, p); len(errs) > 0 {
		return errs
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return field.ErrorList{field.Invalid(p, s, err.Error())}
	}
	return nil
}
