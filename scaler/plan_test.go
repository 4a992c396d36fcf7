package scaler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	autoscalingv1 "k8s.io/api/autoscaling/v1"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/config/configtest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// upstreamConfig is the prober config of the original's example, which Gardener runs in production.
const upstreamConfig = `
kubeConfigSecretName: shoot-access-dependency-watchdog-probe
probeInterval: 30s
kcmNodeMonitorGraceDuration: 40s
nodeLeaseFailureFraction: 0.6
dependentResourceInfos:
  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
    optional: false
    scaleUp: {level: 0}
    scaleDown: {level: 1}
  - ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
    optional: false
    scaleUp: {level: 1, initialDelay: 30s}
    scaleDown: {level: 0}
  - ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
    optional: true
    scaleUp: {level: 2}
    scaleDown: {level: 0}
`

const (
	kcm = "kube-controller-manager"
	mcm = "machine-controller-manager"
	ca  = "cluster-autoscaler"
)

// upstreamInfos returns the dependent resources of upstreamConfig, loaded like the binary loads them.
func upstreamInfos(t testing.TB) []config.DependentResourceInfo {
	t.Helper()
	return configtest.Prober(t, upstreamConfig).DependentResourceInfos
}

// levelInfo returns a Deployment entry with the given levels.
func levelInfo(name string, up, down int) config.DependentResourceInfo {
	return config.DependentResourceInfo{
		Ref:       &autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: name, APIVersion: "apps/v1"},
		ScaleUp:   &config.ScaleInfo{Level: up},
		ScaleDown: &config.ScaleInfo{Level: down},
	}
}

// names returns the resource names of a plan, level by level.
func names(plan [][]config.DependentResourceInfo) [][]string {
	out := make([][]string, 0, len(plan))
	for _, level := range plan {
		var l []string
		for _, info := range level {
			l = append(l, info.Ref.Name)
		}
		out = append(out, l)
	}
	return out
}

func TestPlan(t *testing.T) {
	gaps := []config.DependentResourceInfo{
		levelInfo("a", 5, 0), levelInfo("b", 0, 3), levelInfo("c", 2, 3), levelInfo("d", 5, 0),
		levelInfo("e", 0, 7), levelInfo("f", 2, 0),
	}
	tests := []struct {
		name  string
		infos []config.DependentResourceInfo
		dir   scaler.Direction
		want  [][]string
	}{
		{"upstream down", upstreamInfos(t), scaler.Down, [][]string{{mcm, ca}, {kcm}}},
		{"upstream up", upstreamInfos(t), scaler.Up, [][]string{{kcm}, {mcm}, {ca}}},
		{"gaps and several per level, down", gaps, scaler.Down, [][]string{{"a", "d", "f"}, {"b", "c"}, {"e"}}},
		{"gaps and several per level, up", gaps, scaler.Up, [][]string{{"b", "e"}, {"c", "f"}, {"a", "d"}}},
		{"one resource", gaps[:1], scaler.Up, [][]string{{"a"}}},
		{"no resources", nil, scaler.Down, [][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, names(scaler.Plan(tt.infos, tt.dir)))
		})
	}
}

func TestDirectionString(t *testing.T) {
	assert.Equal(t, "down", scaler.Down.String())
	assert.Equal(t, "up", scaler.Up.String())
	assert.Equal(t, "Direction(0)", scaler.Direction(0).String())
}

func BenchmarkPlan(b *testing.B) {
	infos := upstreamInfos(b)
	b.ReportAllocs()
	for b.Loop() {
		scaler.Plan(infos, scaler.Down)
		scaler.Plan(infos, scaler.Up)
	}
}
