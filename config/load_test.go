package config

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// upstreamProberConfig is the defaulted config of the upstream example, with
// the given secret name.
func upstreamProberConfig(secretName string) *ProberConfig {
	deployment := func(name string) *autoscalingv1.CrossVersionObjectReference {
		return &autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: name, APIVersion: "apps/v1"}
	}
	scale := func(level int, initialDelay time.Duration) *ScaleInfo {
		return &ScaleInfo{Level: level, InitialDelay: duration(initialDelay), Timeout: duration(30 * time.Second)}
	}
	return &ProberConfig{
		KubeConfigSecretName:        secretName,
		ProbeInterval:               duration(30 * time.Second),
		InitialDelay:                duration(30 * time.Second),
		ProbeTimeout:                duration(30 * time.Second),
		BackoffJitterFactor:         ptr(0.2),
		KCMNodeMonitorGraceDuration: duration(40 * time.Second),
		NodeLeaseFailureFraction:    ptr(0.6),
		DependentResourceInfos: []DependentResourceInfo{
			{Ref: deployment("kube-controller-manager"), ScaleUp: scale(0, 0), ScaleDown: scale(1, 0)},
			{Ref: deployment("machine-controller-manager"), ScaleUp: scale(1, 30*time.Second), ScaleDown: scale(0, 0)},
			{Ref: deployment("cluster-autoscaler"), Optional: true, ScaleUp: scale(2, 0), ScaleDown: scale(0, 0)},
		},
	}
}

func TestReadProberConfigUpstreamExamples(t *testing.T) {
	tests := []struct {
		file string
		want *ProberConfig
	}{
		{"prober-gardener.yaml", upstreamProberConfig("shoot-access-dependency-watchdog-probe")},
		{"prober-example.yaml", upstreamProberConfig("dwd-api-server-probe-secret")},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, unknown, errs := ReadProberConfig(filepath.Join("testdata", tt.file))
			require.Empty(t, unknown)
			require.Empty(t, errs)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReadWeederConfigUpstreamExample(t *testing.T) {
	controlplane := metav1.LabelSelectorRequirement{
		Key: "gardener.cloud/role", Operator: metav1.LabelSelectorOpIn, Values: []string{"controlplane"},
	}
	want := &WeederConfig{
		WatchDuration: duration(5 * time.Minute),
		ServicesAndDependantSelectors: map[string]DependantSelectors{
			"etcd-main-client": {PodSelectors: []*metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
				controlplane,
				{Key: "role", Operator: metav1.LabelSelectorOpIn, Values: []string{"apiserver"}},
			}}}},
			"kube-apiserver": {PodSelectors: []*metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
				controlplane,
				{Key: "role", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"main", "apiserver"}},
			}}}},
		},
	}
	got, unknown, errs := ReadWeederConfig(filepath.Join("testdata", "weeder-example.yaml"))
	require.Empty(t, unknown)
	require.Empty(t, errs)
	require.Equal(t, want, got)
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		load func(path string) error
		file string
		want []string
	}{
		{"missing prober file", loadProber, "no-such-file.yaml", []string{"reading the file", "no-such-file.yaml"}},
		{"missing weeder file", loadWeeder, "no-such-file.yaml", []string{"reading the file", "no-such-file.yaml"}},
		{"invalid prober file", loadProber, "prober-mistakes.yaml", []string{"probeTimout", "dependentResourceInfos[3].ref"}},
		{"invalid weeder file", loadWeeder, "weeder-mistakes.yaml", []string{"watchTime", "servicesAndDependantSelectors[kube-apiserver]"}},
		{"weeder file given to the prober", loadProber, "weeder-example.yaml", []string{"servicesAndDependantSelectors"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.load(filepath.Join("testdata", tt.file))
			require.Error(t, err)
			for _, s := range tt.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// loadProber and loadWeeder read a config file and return every problem, its unknown keys too.
func loadProber(path string) error {
	_, unknown, errs := ReadProberConfig(path)
	return append(unknown, errs...).ToAggregate()
}

func loadWeeder(path string) error {
	_, unknown, errs := ReadWeederConfig(path)
	return append(unknown, errs...).ToAggregate()
}

func TestProberConfigWithEveryMistake(t *testing.T) {
	got, errs := decodeProberConfig(readTestdata(t, "prober-mistakes.yaml"))
	assert.Nil(t, got)
	assert.ElementsMatch(t, []fieldErr{
		notSupported("probeTimout"),
		duplicate("initialDelay"),
		notSupported("dependentResourceInfos[1].scaledown"),
		required("kubeConfigSecretName"),
		invalid("probeInterval"),
		invalid("nodeLeaseFailureFraction"),
		invalid("dependentResourceInfos[0].ref.apiVersion"),
		invalid("dependentResourceInfos[1].scaleUp.level"),
		required("dependentResourceInfos[1].scaleDown"),
		notSupported("dependentResourceInfos[2].ref.kind"),
		invalid("dependentResourceInfos[2].scaleUp.timeout"),
		duplicate("dependentResourceInfos[3].ref"),
	}, fieldErrs(errs))
}

func TestWeederConfigWithEveryMistake(t *testing.T) {
	got, errs := decodeWeederConfig(readTestdata(t, "weeder-mistakes.yaml"))
	assert.Nil(t, got)
	assert.ElementsMatch(t, []fieldErr{
		invalid("watchDuration"),
		notSupported("watchTime"),
		invalid("servicesAndDependantSelectors[etcd-main-client].podSelectors[0].matchExpressions[0].operator"),
		required("servicesAndDependantSelectors[kube-apiserver].podSelectors"),
		invalid("servicesAndDependantSelectors[Kube_APIServer]"),
		required("servicesAndDependantSelectors[vpn-seed-server].podSelectors[0]"),
		forbidden("servicesAndDependantSelectors[vpn-seed-server].podSelectors[1].matchExpressions[0].values"),
		notSupported("servicesAndDependantSelectors[vpn-seed-server].podSelectors[1].matchExpressions[0].valeus"),
	}, fieldErrs(errs))
}

// TestErrorsAreDeterministic guards the sorted iteration of maps: the same
// document gives the same errors in the same order.
func TestErrorsAreDeterministic(t *testing.T) {
	data := readTestdata(t, "weeder-mistakes.yaml")
	_, first := decodeWeederConfig(data)
	for range 20 {
		_, again := decodeWeederConfig(data)
		require.Equal(t, first, again)
	}
}
