package config

import (
	"math"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file holds the checks of single values shared by the prober and the
// weeder. A nil pointer is reported as Required: validation expects a
// defaulted config, and its users rely on every defaulted pointer being set.

const unsetDetail = "unset; defaults must be applied before validation"

// validatePositiveDuration requires d to be set and greater than zero.
func validatePositiveDuration(d *metav1.Duration, p *field.Path) field.ErrorList {
	if d == nil {
		return field.ErrorList{field.Required(p, unsetDetail)}
	}
	if d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be greater than zero")}
	}
	return nil
}

// validateNonNegativeDuration requires d to be set and not negative.
func validateNonNegativeDuration(d *metav1.Duration, p *field.Path) field.ErrorList {
	if d == nil {
		return field.ErrorList{field.Required(p, unsetDetail)}
	}
	if d.Duration < 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must not be negative")}
	}
	return nil
}

// validateJitterFactor requires f to be set, finite and not negative.
func validateJitterFactor(f *float64, p *field.Path) field.ErrorList {
	switch {
	case f == nil:
		return field.ErrorList{field.Required(p, unsetDetail)}
	case math.IsNaN(*f) || math.IsInf(*f, 0):
		return field.ErrorList{field.Invalid(p, *f, "must be a finite number")}
	case *f < 0:
		return field.ErrorList{field.Invalid(p, *f, "must not be negative")}
	}
	return nil
}

// validateFraction requires f to be set and in (0, 1]; NaN is outside.
func validateFraction(f *float64, p *field.Path) field.ErrorList {
	if f == nil {
		return field.ErrorList{field.Required(p, unsetDetail)}
	}
	if !(*f > 0 && *f <= 1) {
		return field.ErrorList{field.Invalid(p, *f, "must be greater than 0 and at most 1")}
	}
	return nil
}

// requireValidName requires name to be set and to pass check, a name validation
// of k8s.io/apimachinery/pkg/util/validation.
func requireValidName(name string, check func(string) []string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if msgs := check(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, strings.Join(msgs, "; "))}
	}
	return nil
}

// validateSubdomainName requires a valid object name (DNS-1123 subdomain),
// as for Secrets, Deployments and StatefulSets.
func validateSubdomainName(name string, p *field.Path) field.ErrorList {
	return requireValidName(name, validation.IsDNS1123Subdomain, p)
}
