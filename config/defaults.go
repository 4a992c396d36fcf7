package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetProberDefaults sets every unset defaulted field of c, including those of
// each dependent resource's scaleUp and scaleDown. Set fields are kept, even
// when invalid: validation reports them. A nil c is left alone.
func SetProberDefaults(c *ProberConfig) {
	if c == nil {
		return
	}
	defaultDuration(&c.ProbeInterval, DefaultProbeInterval)
	defaultDuration(&c.InitialDelay, DefaultInitialDelay)
	defaultDuration(&c.ProbeTimeout, DefaultProbeTimeout)
	defaultFloat(&c.BackoffJitterFactor, DefaultBackoffJitterFactor)
	defaultDuration(&c.KCMNodeMonitorGraceDuration, DefaultKCMNodeMonitorGraceDuration)
	defaultFloat(&c.NodeLeaseFailureFraction, DefaultNodeLeaseFailureFraction)
	for i := range c.DependentResourceInfos {
		setScaleDefaults(c.DependentResourceInfos[i].ScaleUp)
		setScaleDefaults(c.DependentResourceInfos[i].ScaleDown)
	}
}

// setScaleDefaults defaults s; a nil s stays nil, as validation requires it.
func setScaleDefaults(s *ScaleInfo) {
	if s == nil {
		return
	}
	defaultDuration(&s.InitialDelay, DefaultScaleInitialDelay)
	defaultDuration(&s.Timeout, DefaultScaleTimeout)
}

// SetWeederDefaults sets every unset defaulted field of c. A nil c is left alone.
func SetWeederDefaults(c *WeederConfig) {
	if c == nil {
		return
	}
	defaultDuration(&c.WatchDuration, DefaultWatchDuration)
}

// defaultDuration points *d at a new Duration of value v when *d is nil.
func defaultDuration(d **metav1.Duration, v time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: v}
	}
}

// defaultFloat points *f at a new float64 of value v when *f is nil.
func defaultFloat(f **float64, v float64) {
	if *f == nil {
		*f = &v
	}
}
