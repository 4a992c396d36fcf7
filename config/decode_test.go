package config

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const minimalProber = `kubeConfigSecretName: probe
dependentResourceInfos:
  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 0}
    scaleDown: {level: 1}
`

func TestDecodeProberConfigDefaults(t *testing.T) {
	got, errs := decodeProberConfig([]byte(minimalProber))
	require.Empty(t, errs)
	scale := func(level int) *ScaleInfo {
		return &ScaleInfo{Level: level, InitialDelay: duration(DefaultScaleInitialDelay), Timeout: duration(DefaultScaleTimeout)}
	}
	require.Equal(t, &ProberConfig{
		KubeConfigSecretName:        "probe",
		ProbeInterval:               duration(10 * time.Second),
		InitialDelay:                duration(30 * time.Second),
		ProbeTimeout:                duration(30 * time.Second),
		BackoffJitterFactor:         ptr(0.2),
		KCMNodeMonitorGraceDuration: duration(40 * time.Second),
		NodeLeaseFailureFraction:    ptr(0.6),
		DependentResourceInfos: []DependentResourceInfo{{
			Ref:     &autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "kube-controller-manager", APIVersion: "apps/v1"},
			ScaleUp: scale(0), ScaleDown: scale(1),
		}},
	}, got)
}

func TestDecodeProberConfig(t *testing.T) {
	const dri0 = "dependentResourceInfos[0]"
	tests := []struct {
		name string
		yaml string
		want []fieldErr
	}{
		{"minimal", minimalProber, nil},
		{"leading document marker", "---\n" + minimalProber, nil},
		{"trailing empty document", minimalProber + "---\n", nil},
		{"anchors, aliases and merge keys", `kubeConfigSecretName: probe
dependentResourceInfos:
  - ref: &ref {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
    scaleUp: &up {level: 0}
    scaleDown: {<<: *up, level: 1}
  - ref: {<<: *ref, name: machine-controller-manager}
    scaleUp: *up
    scaleDown: {level: 0}
`, nil},
		{"empty document", "", []fieldErr{required("<document>")}},
		{"null document", "null\n", []fieldErr{required("<document>")}},
		{"only comments", "# nothing here\n", []fieldErr{required("<document>")}},
		{"list document", "- kubeConfigSecretName: probe\n", []fieldErr{invalid("<document>")}},
		{"scalar document", "probe\n", []fieldErr{invalid("<document>")}},
		{"YAML syntax error", "kubeConfigSecretName: [probe\n", []fieldErr{invalid("<document>")}},
		{"second document", minimalProber + "---\nprobeInterval: 5s\n", []fieldErr{forbidden("<document>")}},
		{"unknown top-level key", minimalProber + "probeIntervall: 5s\n", []fieldErr{notSupported("probeIntervall")}},
		{"key in the wrong case", minimalProber + "ProbeInterval: 5s\n", []fieldErr{notSupported("ProbeInterval")}},
		{"unknown nested key", replace(minimalProber, "{level: 0}", "{level: 0, delay: 1s}"),
			[]fieldErr{notSupported(dri0 + ".scaleUp.delay")}},
		{"unknown key in ref", replace(minimalProber, "apiVersion: apps/v1}", "apiVersion: apps/v1, namespace: x}"),
			[]fieldErr{notSupported(dri0 + ".ref.namespace")}},
		{"misspelled required key", replace(minimalProber, "scaleDown:", "scaledown:"),
			[]fieldErr{notSupported(dri0 + ".scaledown"), required(dri0 + ".scaleDown")}},
		{"duplicate top-level key", minimalProber + "kubeConfigSecretName: other\n", []fieldErr{duplicate("kubeConfigSecretName")}},
		{"duplicate nested key", replace(minimalProber, "{level: 0}", "{level: 0, level: 2}"),
			[]fieldErr{duplicate(dri0 + ".scaleUp.level")}},
		{"duplicate key in JSON syntax", `{"kubeConfigSecretName": "a", "kubeConfigSecretName": "b"}`,
			[]fieldErr{duplicate("kubeConfigSecretName"), required("dependentResourceInfos")}},
		{"unparsable duration", minimalProber + "probeInterval: 10 seconds\n", []fieldErr{invalid("probeInterval")}},
		{"every unparsable duration", replace(minimalProber, "{level: 0}", "{level: 0, timeout: 1min}") + "probeInterval: abc\n",
			[]fieldErr{invalid(dri0 + ".scaleUp.timeout"), invalid("probeInterval")}},
		{"duration without unit", minimalProber + "probeTimeout: 30\n", []fieldErr{invalid("probeTimeout")}},
		{"number for a string", replace(minimalProber, "probe", "42"), []fieldErr{invalid("kubeConfigSecretName")}},
		// The decoder names the field of a type error without list indices.
		{"string for an integer", replace(minimalProber, "{level: 0}", "{level: first}"),
			[]fieldErr{invalid("dependentResourceInfos.scaleUp.level")}},
		{"fraction for an integer", replace(minimalProber, "{level: 0}", "{level: 1.5}"),
			[]fieldErr{invalid("dependentResourceInfos.scaleUp.level")}},
		{"integer overflow", replace(minimalProber, "{level: 0}", "{level: 99999999999999999999}"),
			[]fieldErr{invalid("dependentResourceInfos.scaleUp.level")}},
		{"NaN", minimalProber + "backoffJitterFactor: .nan\n", []fieldErr{invalid("<document>")}},
		{"infinity", minimalProber + "nodeLeaseFailureFraction: .inf\n", []fieldErr{invalid("<document>")}},
		{"mapping for a list", "kubeConfigSecretName: probe\ndependentResourceInfos: {ref: {}}\n",
			[]fieldErr{invalid("dependentResourceInfos")}},
		{"unknown key reported despite a type error", minimalProber + "probeTimout: 30s\nbackoffJitterFactor: high\n",
			[]fieldErr{notSupported("probeTimout"), invalid("backoffJitterFactor")}},
		{"null ref", replace(minimalProber, "ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}", "ref: null"),
			[]fieldErr{required(dri0 + ".ref")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := decodeProberConfig([]byte(tt.yaml))
			assert.ElementsMatch(t, tt.want, fieldErrs(errs))
			assert.Equal(t, len(tt.want) > 0, got == nil, "config returned together with errors, or neither")
		})
	}
}

const minimalWeeder = `servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors:
      - matchLabels: {role: apiserver}
`

func TestDecodeWeederConfig(t *testing.T) {
	const etcd = "servicesAndDependantSelectors[etcd-main-client]"
	tests := []struct {
		name string
		yaml string
		want []fieldErr
	}{
		{"minimal", minimalWeeder, nil},
		{"empty document", "", []fieldErr{required("<document>")}},
		{"unknown top-level key", minimalWeeder + "watchTime: 5m\n", []fieldErr{notSupported("watchTime")}},
		{"unknown key in an entry", replace(minimalWeeder, "podSelectors:", "podSelector:"),
			[]fieldErr{notSupported(etcd + ".podSelector"), required(etcd + ".podSelectors")}},
		{"unknown key in a selector", replace(minimalWeeder, "matchLabels", "matchLabel"),
			[]fieldErr{notSupported(etcd + ".podSelectors[0].matchLabel")}},
		{"unknown key below a dotted service name", "servicesAndDependantSelectors:\n  etcd.main:\n    podSelectorz: []\n",
			[]fieldErr{notSupported("servicesAndDependantSelectors[etcd.main].podSelectorz"),
				invalid("servicesAndDependantSelectors[etcd.main]"), required("servicesAndDependantSelectors[etcd.main].podSelectors")}},
		{"duplicate service", minimalWeeder + "  etcd-main-client: {podSelectors: [{}]}\n", []fieldErr{duplicate(etcd)}},
		{"duplicate label", replace(minimalWeeder, "{role: apiserver}", "{role: apiserver, role: etcd}"),
			[]fieldErr{duplicate(etcd + ".podSelectors[0].matchLabels[role]")}},
		{"unparsable watchDuration", minimalWeeder + "watchDuration: 5 minutes\n", []fieldErr{invalid("watchDuration")}},
		{"zero watchDuration", minimalWeeder + "watchDuration: 0s\n", []fieldErr{invalid("watchDuration")}},
		{"null selector", replace(minimalWeeder, "- matchLabels: {role: apiserver}", "- null"),
			[]fieldErr{required(etcd + ".podSelectors[0]")}},
		{"list of services", "servicesAndDependantSelectors: [etcd-main-client]\n", []fieldErr{invalid("servicesAndDependantSelectors")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := decodeWeederConfig([]byte(tt.yaml))
			assert.ElementsMatch(t, tt.want, fieldErrs(errs))
			assert.Equal(t, len(tt.want) > 0, got == nil, "config returned together with errors, or neither")
		})
	}
}

// replace replaces the only occurrence of old in s, failing loudly on a
// typo in a test case.
func replace(s, old, replacement string) string {
	if strings.Count(s, old) != 1 {
		panic("test case: " + strconv.Quote(old) + " does not occur exactly once")
	}
	return strings.Replace(s, old, replacement, 1)
}

func TestDecodeProberConfigLenient(t *testing.T) {
	const dri0 = "dependentResourceInfos[0]"
	tests := []struct {
		name        string
		yaml        string
		wantUnknown []fieldErr
		wantErrs    []fieldErr
	}{
		{"no unknown key", minimalProber, nil, nil},
		{"unknown top-level key", minimalProber + "failureThreshold: 3\n", []fieldErr{notSupported("failureThreshold")}, nil},
		{"legacy secret names", replace(minimalProber, "kubeConfigSecretName: probe",
			"kubeConfigSecretName: probe\ninternalKubeConfigSecretName: a\nexternalKubeConfigSecretName: b"),
			[]fieldErr{notSupported("internalKubeConfigSecretName"), notSupported("externalKubeConfigSecretName")}, nil},
		{"unknown nested key", replace(minimalProber, "{level: 0}", "{level: 0, delay: 1s}"),
			[]fieldErr{notSupported(dri0 + ".scaleUp.delay")}, nil},
		{"unknown key with a value of any type", minimalProber + "future: {a: [1, 2], b: true}\n", []fieldErr{notSupported("future")}, nil},
		{"misspelled required key", replace(minimalProber, "scaleDown:", "scaledown:"),
			[]fieldErr{notSupported(dri0 + ".scaledown")}, []fieldErr{required(dri0 + ".scaleDown")}},
		{"duplicate key stays an error", minimalProber + "future: 1\nkubeConfigSecretName: other\n",
			[]fieldErr{notSupported("future")}, []fieldErr{duplicate("kubeConfigSecretName")}},
		{"wrong type stays an error", minimalProber + "future: 1\nbackoffJitterFactor: high\n",
			[]fieldErr{notSupported("future")}, []fieldErr{invalid("backoffJitterFactor")}},
		{"invalid value stays an error", minimalProber + "future: 1\nprobeInterval: 1h\n",
			[]fieldErr{notSupported("future")}, []fieldErr{invalid("probeInterval")}},
		{"malformed YAML stays an error", "kubeConfigSecretName: [probe\n", nil, []fieldErr{invalid("<document>")}},
		{"second document stays an error", minimalProber + "---\nfuture: 1\n", nil, []fieldErr{forbidden("<document>")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unknown, errs := DecodeProberConfigLenient([]byte(tt.yaml))
			assert.ElementsMatch(t, tt.wantUnknown, fieldErrs(unknown))
			assert.ElementsMatch(t, tt.wantErrs, fieldErrs(errs))
			assert.Equal(t, len(tt.wantErrs) > 0, got == nil, "config returned together with errors, or neither")

			_, strictErrs := decodeProberConfig([]byte(tt.yaml))
			assert.ElementsMatch(t, append(tt.wantUnknown, tt.wantErrs...), fieldErrs(strictErrs),
				"a strict decode reports the unknown keys as errors")
		})
	}
}

func TestDecodeWeederConfigLenient(t *testing.T) {
	got, unknown, errs := DecodeWeederConfigLenient([]byte(minimalWeeder + "watchTime: 5m\n"))
	require.Empty(t, errs)
	assert.Equal(t, []fieldErr{notSupported("watchTime")}, fieldErrs(unknown))
	assert.Equal(t, DefaultWatchDuration, got.WatchDuration.Duration)

	_, strictErrs := decodeWeederConfig([]byte(minimalWeeder + "watchTime: 5m\n"))
	assert.Equal(t, []fieldErr{notSupported("watchTime")}, fieldErrs(strictErrs))
}

// decodeProberConfig decodes the YAML data strictly (a key the config does not have is an error too), defaults and validates
// it. It returns either the config or every problem found, never both.
func decodeProberConfig(data []byte) (*ProberConfig, field.ErrorList) {
	return strict(DecodeProberConfigLenient(data))
}

// decodeWeederConfig decodes the YAML data strictly, defaults and validates
// it. It returns either the config or every problem found, never both.
func decodeWeederConfig(data []byte) (*WeederConfig, field.ErrorList) {
	return strict(DecodeWeederConfigLenient(data))
}

// strict makes the unknown keys of a lenient decode errors.
func strict[T any](c *T, unknown, errs field.ErrorList) (*T, field.ErrorList) {
	if errs = append(unknown, errs...); len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}
