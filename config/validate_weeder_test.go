package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// validWeederConfig returns a small defaulted config that passes validation.
func validWeederConfig() *WeederConfig {
	c := &WeederConfig{
		ServicesAndDependantSelectors: map[string]DependantSelectors{
			"etcd-main-client": {PodSelectors: []*metav1.LabelSelector{{
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "role", Operator: metav1.LabelSelectorOpIn, Values: []string{"apiserver"}},
				},
			}}},
			"kube-apiserver": {PodSelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"role": "controller-manager"}}}},
		},
	}
	SetWeederDefaults(c)
	return c
}

func TestValidateWeederConfig(t *testing.T) {
	const etcd = "servicesAndDependantSelectors[etcd-main-client].podSelectors"
	requirement := func(c *WeederConfig) *metav1.LabelSelectorRequirement {
		return &c.ServicesAndDependantSelectors["etcd-main-client"].PodSelectors[0].MatchExpressions[0]
	}
	tests := []struct {
		name   string
		mutate func(c *WeederConfig)
		want   []fieldErr
	}{
		{"valid", func(*WeederConfig) {}, nil},
		{"watchDuration unset", func(c *WeederConfig) { c.WatchDuration = nil }, []fieldErr{required("watchDuration")}},
		{"watchDuration zero", func(c *WeederConfig) { c.WatchDuration = duration(0) }, []fieldErr{invalid("watchDuration")}},
		{"watchDuration negative", func(c *WeederConfig) { c.WatchDuration = duration(-time.Minute) }, []fieldErr{invalid("watchDuration")}},
		{"watchDuration 1ns", func(c *WeederConfig) { c.WatchDuration = duration(1) }, nil},
		{"watchDuration 1h", func(c *WeederConfig) { c.WatchDuration = duration(time.Hour) }, nil},
		{"watchDuration above 1h", func(c *WeederConfig) { c.WatchDuration = duration(time.Hour + 1) }, []fieldErr{invalid("watchDuration")}},
		{"services missing", func(c *WeederConfig) { c.ServicesAndDependantSelectors = nil }, []fieldErr{required("servicesAndDependantSelectors")}},
		{"services empty", func(c *WeederConfig) { c.ServicesAndDependantSelectors = map[string]DependantSelectors{} },
			[]fieldErr{required("servicesAndDependantSelectors")}},
		{"service name not a DNS-1035 label", func(c *WeederConfig) {
			c.ServicesAndDependantSelectors["etcd.main"] = c.ServicesAndDependantSelectors["kube-apiserver"]
		}, []fieldErr{invalid("servicesAndDependantSelectors[etcd.main]")}},
		{"service name empty", func(c *WeederConfig) {
			c.ServicesAndDependantSelectors[""] = c.ServicesAndDependantSelectors["kube-apiserver"]
		}, []fieldErr{required("servicesAndDependantSelectors[]")}},
		{"podSelectors missing", func(c *WeederConfig) { c.ServicesAndDependantSelectors["etcd-main-client"] = DependantSelectors{} },
			[]fieldErr{required(etcd)}},
		{"podSelector nil", func(c *WeederConfig) { c.ServicesAndDependantSelectors["etcd-main-client"].PodSelectors[0] = nil },
			[]fieldErr{required(etcd + "[0]")}},
		{"podSelector empty matches every pod", func(c *WeederConfig) {
			c.ServicesAndDependantSelectors["etcd-main-client"].PodSelectors[0] = &metav1.LabelSelector{}
		}, nil},
		{"operator unknown", func(c *WeederConfig) { requirement(c).Operator = "Within" },
			[]fieldErr{invalid(etcd + "[0].matchExpressions[0].operator")}},
		{"operator In without values", func(c *WeederConfig) { requirement(c).Values = nil },
			[]fieldErr{required(etcd + "[0].matchExpressions[0].values")}},
		{"operator Exists with values", func(c *WeederConfig) { requirement(c).Operator = metav1.LabelSelectorOpExists },
			[]fieldErr{forbidden(etcd + "[0].matchExpressions[0].values")}},
		{"key invalid", func(c *WeederConfig) { requirement(c).Key = "-role" },
			[]fieldErr{invalid(etcd + "[0].matchExpressions[0].key")}},
		{"value invalid", func(c *WeederConfig) { requirement(c).Values = []string{"api server"} },
			[]fieldErr{invalid(etcd + "[0].matchExpressions[0].values[0]")}},
		{"matchLabels value invalid", func(c *WeederConfig) {
			c.ServicesAndDependantSelectors["kube-apiserver"].PodSelectors[0].MatchLabels["role"] = "-"
		}, []fieldErr{invalid("servicesAndDependantSelectors[kube-apiserver].podSelectors[0].matchLabels")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validWeederConfig()
			tt.mutate(c)
			assert.Equal(t, tt.want, nilIfEmpty(fieldErrs(ValidateWeederConfig(c))))
		})
	}
}

func TestValidateWeederConfigNil(t *testing.T) {
	assert.Equal(t, []fieldErr{required("<document>")}, fieldErrs(ValidateWeederConfig(nil)))
}
