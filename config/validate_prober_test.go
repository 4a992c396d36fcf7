package config

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
)

// validProberConfig returns a small defaulted config that passes validation.
func validProberConfig() *ProberConfig {
	scale := func(level int) *ScaleInfo {
		return &ScaleInfo{Level: level, InitialDelay: duration(0), Timeout: duration(30 * time.Second)}
	}
	c := &ProberConfig{
		KubeConfigSecretName: "shoot-access-dependency-watchdog-probe",
		DependentResourceInfos: []DependentResourceInfo{
			{Ref: &autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "kube-controller-manager", APIVersion: "apps/v1"},
				ScaleUp: scale(0), ScaleDown: scale(1)},
			{Ref: &autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "machine-controller-manager", APIVersion: "apps/v1"},
				ScaleUp: scale(1), ScaleDown: scale(0)},
		},
	}
	SetProberDefaults(c)
	return c
}

func TestValidateProberConfig(t *testing.T) {
	const dri1 = "dependentResourceInfos[1]"
	tests := []struct {
		name   string
		mutate func(c *ProberConfig)
		want   []fieldErr
	}{
		{"valid", func(*ProberConfig) {}, nil},
		{"secret name missing", func(c *ProberConfig) { c.KubeConfigSecretName = "" }, []fieldErr{required("kubeConfigSecretName")}},
		{"secret name not a DNS subdomain", func(c *ProberConfig) { c.KubeConfigSecretName = "Shoot_Access" }, []fieldErr{invalid("kubeConfigSecretName")}},
		{"probeInterval unset", func(c *ProberConfig) { c.ProbeInterval = nil }, []fieldErr{required("probeInterval")}},
		{"probeInterval zero", func(c *ProberConfig) { c.ProbeInterval = duration(0) }, []fieldErr{invalid("probeInterval")}},
		{"probeInterval negative", func(c *ProberConfig) { c.ProbeInterval = duration(-time.Second) }, []fieldErr{invalid("probeInterval")}},
		{"probeInterval below 1s", func(c *ProberConfig) { c.ProbeInterval = duration(999 * time.Millisecond) }, []fieldErr{invalid("probeInterval")}},
		{"probeInterval 1s", func(c *ProberConfig) { c.ProbeInterval = duration(time.Second) }, nil},
		{"probeInterval 10m", func(c *ProberConfig) { c.ProbeInterval = duration(10 * time.Minute) }, nil},
		{"probeInterval above 10m", func(c *ProberConfig) { c.ProbeInterval = duration(10*time.Minute + 1) }, []fieldErr{invalid("probeInterval")}},
		{"probeInterval near the time.Duration limit", func(c *ProberConfig) { c.ProbeInterval = duration(2562047 * time.Hour) },
			[]fieldErr{invalid("probeInterval")}},
		{"initialDelay unset", func(c *ProberConfig) { c.InitialDelay = nil }, []fieldErr{required("initialDelay")}},
		{"initialDelay zero", func(c *ProberConfig) { c.InitialDelay = duration(0) }, nil},
		{"initialDelay negative", func(c *ProberConfig) { c.InitialDelay = duration(-time.Second) }, []fieldErr{invalid("initialDelay")}},
		{"initialDelay 10m", func(c *ProberConfig) { c.InitialDelay = duration(10 * time.Minute) }, nil},
		{"initialDelay above 10m", func(c *ProberConfig) { c.InitialDelay = duration(10*time.Minute + 1) }, []fieldErr{invalid("initialDelay")}},
		{"probeTimeout unset", func(c *ProberConfig) { c.ProbeTimeout = nil }, []fieldErr{required("probeTimeout")}},
		{"probeTimeout zero", func(c *ProberConfig) { c.ProbeTimeout = duration(0) }, []fieldErr{invalid("probeTimeout")}},
		{"probeTimeout below 1s", func(c *ProberConfig) { c.ProbeTimeout = duration(500 * time.Millisecond) }, []fieldErr{invalid("probeTimeout")}},
		{"probeTimeout 1s", func(c *ProberConfig) { c.ProbeTimeout = duration(time.Second) }, nil},
		{"probeTimeout 5m", func(c *ProberConfig) { c.ProbeTimeout = duration(5 * time.Minute) }, nil},
		{"probeTimeout above 5m", func(c *ProberConfig) { c.ProbeTimeout = duration(5*time.Minute + 1) }, []fieldErr{invalid("probeTimeout")}},
		{"backoffJitterFactor unset", func(c *ProberConfig) { c.BackoffJitterFactor = nil }, []fieldErr{required("backoffJitterFactor")}},
		{"backoffJitterFactor zero", func(c *ProberConfig) { c.BackoffJitterFactor = ptr(0.0) }, nil},
		{"backoffJitterFactor negative", func(c *ProberConfig) { c.BackoffJitterFactor = ptr(-0.1) }, []fieldErr{invalid("backoffJitterFactor")}},
		{"backoffJitterFactor NaN", func(c *ProberConfig) { c.BackoffJitterFactor = ptr(math.NaN()) }, []fieldErr{invalid("backoffJitterFactor")}},
		{"backoffJitterFactor infinite", func(c *ProberConfig) { c.BackoffJitterFactor = ptr(math.Inf(1)) }, []fieldErr{invalid("backoffJitterFactor")}},
		{"backoffJitterFactor one", func(c *ProberConfig) { c.BackoffJitterFactor = ptr(1.0) }, nil},
		{"backoffJitterFactor above one", func(c *ProberConfig) { c.BackoffJitterFactor = ptr(1.01) }, []fieldErr{invalid("backoffJitterFactor")}},
		{"backoffJitterFactor huge", func(c *ProberConfig) { c.BackoffJitterFactor = ptr(1e10) }, []fieldErr{invalid("backoffJitterFactor")}},
		{"kcmNodeMonitorGraceDuration unset", func(c *ProberConfig) { c.KCMNodeMonitorGraceDuration = nil }, []fieldErr{required("kcmNodeMonitorGraceDuration")}},
		{"kcmNodeMonitorGraceDuration zero", func(c *ProberConfig) { c.KCMNodeMonitorGraceDuration = duration(0) }, []fieldErr{invalid("kcmNodeMonitorGraceDuration")}},
		{"kcmNodeMonitorGraceDuration 1s", func(c *ProberConfig) { c.KCMNodeMonitorGraceDuration = duration(time.Second) },
			[]fieldErr{invalid("kcmNodeMonitorGraceDuration")}},
		{"kcmNodeMonitorGraceDuration below 16s", func(c *ProberConfig) { c.KCMNodeMonitorGraceDuration = duration(16*time.Second - 1) },
			[]fieldErr{invalid("kcmNodeMonitorGraceDuration")}},
		{"kcmNodeMonitorGraceDuration 16s", func(c *ProberConfig) { c.KCMNodeMonitorGraceDuration = duration(16 * time.Second) }, nil},
		{"kcmNodeMonitorGraceDuration 10m", func(c *ProberConfig) { c.KCMNodeMonitorGraceDuration = duration(10 * time.Minute) }, nil},
		{"kcmNodeMonitorGraceDuration above 10m", func(c *ProberConfig) { c.KCMNodeMonitorGraceDuration = duration(10*time.Minute + 1) },
			[]fieldErr{invalid("kcmNodeMonitorGraceDuration")}},
		{"nodeLeaseFailureFraction unset", func(c *ProberConfig) { c.NodeLeaseFailureFraction = nil }, []fieldErr{required("nodeLeaseFailureFraction")}},
		{"nodeLeaseFailureFraction zero", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(0.0) }, []fieldErr{invalid("nodeLeaseFailureFraction")}},
		{"nodeLeaseFailureFraction negative", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(-0.5) }, []fieldErr{invalid("nodeLeaseFailureFraction")}},
		{"nodeLeaseFailureFraction tiny", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(1e-9) }, []fieldErr{invalid("nodeLeaseFailureFraction")}},
		{"nodeLeaseFailureFraction 0.2", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(0.2) }, []fieldErr{invalid("nodeLeaseFailureFraction")}},
		{"nodeLeaseFailureFraction just below 0.5", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(0.4999) }, []fieldErr{invalid("nodeLeaseFailureFraction")}},
		{"nodeLeaseFailureFraction 0.5", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(0.5) }, nil},
		{"nodeLeaseFailureFraction Gardener's 0.6", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(0.6) }, nil},
		{"nodeLeaseFailureFraction one", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(1.0) }, nil},
		{"nodeLeaseFailureFraction above one", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(1.5) }, []fieldErr{invalid("nodeLeaseFailureFraction")}},
		{"nodeLeaseFailureFraction NaN", func(c *ProberConfig) { c.NodeLeaseFailureFraction = ptr(math.NaN()) }, []fieldErr{invalid("nodeLeaseFailureFraction")}},
		{"dependentResourceInfos missing", func(c *ProberConfig) { c.DependentResourceInfos = nil }, []fieldErr{required("dependentResourceInfos")}},
		{"dependentResourceInfos empty", func(c *ProberConfig) { c.DependentResourceInfos = []DependentResourceInfo{} }, []fieldErr{required("dependentResourceInfos")}},
		{"ref missing", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref = nil }, []fieldErr{required(dri1 + ".ref")}},
		{"ref kind missing", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.Kind = "" }, []fieldErr{required(dri1 + ".ref.kind")}},
		{"ref name missing", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.Name = "" }, []fieldErr{required(dri1 + ".ref.name")}},
		{"ref name not a DNS subdomain", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.Name = "MCM" }, []fieldErr{invalid(dri1 + ".ref.name")}},
		{"ref apiVersion missing", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.APIVersion = "" }, []fieldErr{required(dri1 + ".ref.apiVersion")}},
		{"ref apiVersion unparsable", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.APIVersion = "apps/v1/beta" }, []fieldErr{invalid(dri1 + ".ref.apiVersion")}},
		{"ref kind without scale subresource", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.Kind = "ConfigMap" }, []fieldErr{notSupported(dri1 + ".ref.kind")}},
		{"ref kind in the wrong case", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.Kind = "deployment" }, []fieldErr{notSupported(dri1 + ".ref.kind")}},
		{"ref apiVersion not served for the kind", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.APIVersion = "extensions/v1beta1" },
			[]fieldErr{notSupported(dri1 + ".ref.apiVersion")}},
		{"ref StatefulSet", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.Kind = "StatefulSet" }, nil},
		{"ref duplicate", func(c *ProberConfig) { c.DependentResourceInfos[1].Ref.Name = "kube-controller-manager" }, []fieldErr{duplicate(dri1 + ".ref")}},
		{"ref duplicate under another version of the group", func(c *ProberConfig) {
			c.DependentResourceInfos[1].Ref.Name = "kube-controller-manager"
			c.DependentResourceInfos[1].Ref.APIVersion = "apps/v1beta2"
		}, []fieldErr{notSupported(dri1 + ".ref.apiVersion"), duplicate(dri1 + ".ref")}},
		{"same name, other kind", func(c *ProberConfig) {
			c.DependentResourceInfos[1].Ref.Name = "kube-controller-manager"
			c.DependentResourceInfos[1].Ref.Kind = "StatefulSet"
		}, nil},
		{"scaleUp missing", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleUp = nil }, []fieldErr{required(dri1 + ".scaleUp")}},
		{"scaleDown missing", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleDown = nil }, []fieldErr{required(dri1 + ".scaleDown")}},
		{"level negative", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleDown.Level = -1 }, []fieldErr{invalid(dri1 + ".scaleDown.level")}},
		{"scale initialDelay unset", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleUp.InitialDelay = nil }, []fieldErr{required(dri1 + ".scaleUp.initialDelay")}},
		{"scale initialDelay negative", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleUp.InitialDelay = duration(-time.Second) },
			[]fieldErr{invalid(dri1 + ".scaleUp.initialDelay")}},
		{"scale initialDelay zero", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleDown.InitialDelay = duration(0) }, nil},
		{"scale initialDelay 10m", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleUp.InitialDelay = duration(10 * time.Minute) }, nil},
		{"scale initialDelay above 10m", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleDown.InitialDelay = duration(time.Hour) },
			[]fieldErr{invalid(dri1 + ".scaleDown.initialDelay")}},
		{"scale timeout unset", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleUp.Timeout = nil }, []fieldErr{required(dri1 + ".scaleUp.timeout")}},
		{"scale timeout zero", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleUp.Timeout = duration(0) }, []fieldErr{invalid(dri1 + ".scaleUp.timeout")}},
		{"scale timeout negative", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleDown.Timeout = duration(-time.Second) },
			[]fieldErr{invalid(dri1 + ".scaleDown.timeout")}},
		{"scale timeout 1ns", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleUp.Timeout = duration(1) }, nil},
		{"scale timeout 10m", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleUp.Timeout = duration(10 * time.Minute) }, nil},
		{"scale timeout above 10m", func(c *ProberConfig) { c.DependentResourceInfos[1].ScaleDown.Timeout = duration(10*time.Minute + 1) },
			[]fieldErr{invalid(dri1 + ".scaleDown.timeout")}},
		{"every bound broken at once", func(c *ProberConfig) {
			c.ProbeInterval, c.ProbeTimeout, c.InitialDelay = duration(time.Hour), duration(time.Hour), duration(time.Hour)
			c.BackoffJitterFactor, c.KCMNodeMonitorGraceDuration = ptr(2.0), duration(time.Second)
			c.DependentResourceInfos[0].ScaleUp.Timeout = duration(time.Hour)
		}, []fieldErr{invalid("probeInterval"), invalid("initialDelay"), invalid("probeTimeout"), invalid("backoffJitterFactor"),
			invalid("kcmNodeMonitorGraceDuration"), invalid("dependentResourceInfos[0].scaleUp.timeout")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validProberConfig()
			tt.mutate(c)
			assert.Equal(t, tt.want, nilIfEmpty(fieldErrs(ValidateProberConfig(c))))
		})
	}
}

func TestValidateProberConfigNil(t *testing.T) {
	assert.Equal(t, []fieldErr{required("<document>")}, fieldErrs(ValidateProberConfig(nil)))
}

// TestFailureFractionFloorError: a fraction below the floor is refused with its field path, the value and
// the floor in the message, and a value outside (0, 1] keeps the message of a fraction.
func TestFailureFractionFloorError(t *testing.T) {
	c := validProberConfig()
	c.NodeLeaseFailureFraction = ptr(0.2)
	errs := ValidateProberConfig(c)
	require.Len(t, errs, 1)
	assert.Contains(t, errs.ToAggregate().Error(), "nodeLeaseFailureFraction: Invalid value: 0.2: must be at least 0.5")

	c.NodeLeaseFailureFraction = ptr(1.5)
	assert.Equal(t, "nodeLeaseFailureFraction: Invalid value: 1.5: must be greater than 0 and at most 1",
		ValidateProberConfig(c).ToAggregate().Error(), "the README shows this message")
}

// nilIfEmpty lets a test case write "no errors" as nil.
func nilIfEmpty(errs []fieldErr) []fieldErr {
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func TestDurationRangeDetail(t *testing.T) {
	tests := []struct {
		name string
		r    durationRange
		d    time.Duration
		want string
	}{
		{"inside", probeIntervalRange, time.Minute, ""},
		{"closed minimum, included", probeIntervalRange, time.Second, ""},
		{"closed maximum, included", probeIntervalRange, 10 * time.Minute, ""},
		{"below a closed minimum", probeIntervalRange, time.Millisecond, "must be at least 1s"},
		{"above the maximum", probeIntervalRange, time.Hour, "must be at most 10m0s"},
		{"negative where zero is allowed", delayRange, -time.Second, "must not be negative"},
		{"zero where zero is allowed", delayRange, 0, ""},
		{"zero at an open zero minimum", scaleTimeoutRange, 0, "must be greater than zero"},
		{"at an open minimum", durationRange{min: time.Second, openMin: true, max: time.Hour}, time.Second, "must be greater than 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.r.problem(tt.d))
		})
	}
}

func TestClampGracePeriod(t *testing.T) {
	tests := []struct {
		name        string
		in          time.Duration
		want        time.Duration
		wantClamped bool
	}{
		{"default", 40 * time.Second, 40 * time.Second, false},
		{"minimum", 16 * time.Second, 16 * time.Second, false},
		{"maximum", 10 * time.Minute, 10 * time.Minute, false},
		{"shorter than a lease renewal", time.Second, 16 * time.Second, true},
		{"just below the minimum", 16*time.Second - 1, 16 * time.Second, true},
		{"zero", 0, 16 * time.Second, true},
		{"negative", -time.Minute, 16 * time.Second, true},
		{"above the maximum", time.Hour, 10 * time.Minute, true},
		{"the time.Duration limit", math.MaxInt64, 10 * time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, clamped := ClampGracePeriod(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantClamped, clamped)
		})
	}
}

// TestGraceBoundsAgree guards that a clamped Shoot grace period is one that
// kcmNodeMonitorGraceDuration may be, and that the floor outlasts a lease
// renewal (10 s) at the prober's 0.75 expiry factor.
func TestGraceBoundsAgree(t *testing.T) {
	for _, d := range []time.Duration{0, time.Second, time.Minute, time.Hour} {
		clamped, _ := ClampGracePeriod(d)
		c := validProberConfig()
		c.KCMNodeMonitorGraceDuration = duration(clamped)
		assert.Empty(t, ValidateProberConfig(c), "ClampGracePeriod(%s) = %s", d, clamped)
	}
	assert.Greater(t, time.Duration(float64(minGracePeriod)*0.75), 10*time.Second)
}
