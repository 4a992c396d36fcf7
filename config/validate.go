package config

import (
	"math"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file holds the checks of single values shared by the prober and the
// weeder. A nil pointer is reported as Required: validation expects a
// defaulted config, and its users rely on every defaulted pointer being set.

const unsetDetail = "unset; defaults must be applied before validation"

// durationRange is the range a duration must lie in: from min (excluded when
// openMin) to max, included.
type durationRange struct {
	min, max time.Duration
	openMin  bool
}

// problem returns why d is outside r, or "" when it is inside.
func (r durationRange) problem(d time.Duration) string {
	switch {
	case r.openMin && d <= r.min && r.min == 0:
		return "must be greater than zero"
	case r.openMin && d <= r.min:
		return "must be greater than " + r.min.String()
	case d < r.min && r.min == 0:
		return "must not be negative"
	case d < r.min:
		return "must be at least " + r.min.String()
	case d > r.max:
		return "must be at most " + r.max.String()
	}
	return ""
}

// validateDuration requires d to be set and within r.
func validateDuration(d *metav1.Duration, r durationRange, p *field.Path) field.ErrorList {
	if d == nil {
		return field.ErrorList{field.Required(p, unsetDetail)}
	}
	if msg := r.problem(d.Duration); msg != "" {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), msg)}
	}
	return nil
}

// validateJitterFactor requires f to be set and in [0, 1]; NaN is outside.
// Above 1 a period could be stretched far beyond the interval, and a huge
// factor overflows time.Duration in the prober's jitter.
func validateJitterFactor(f *float64, p *field.Path) field.ErrorList {
	switch {
	case f == nil:
		return field.ErrorList{field.Required(p, unsetDetail)}
	case math.IsNaN(*f) || math.IsInf(*f, 0):
		return field.ErrorList{field.Invalid(p, *f, "must be a finite number")}
	case *f < 0:
		return field.ErrorList{field.Invalid(p, *f, "must not be negative")}
	case *f > 1:
		return field.ErrorList{field.Invalid(p, *f, "must be at most 1")}
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
