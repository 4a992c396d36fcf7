package deploy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// vpa is the part of an autoscaling.k8s.io/v1 VerticalPodAutoscaler the tree writes; decoding into it
// strictly fails on any other field.
type vpa struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		TargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"targetRef"`
		UpdatePolicy struct {
			UpdateMode string `json:"updateMode"`
		} `json:"updatePolicy"`
		ResourcePolicy struct {
			ContainerPolicies []vpaContainerPolicy `json:"containerPolicies"`
		} `json:"resourcePolicy"`
	} `json:"spec"`
}

type vpaContainerPolicy struct {
	ContainerName    string              `json:"containerName"`
	Mode             string              `json:"mode,omitempty"`
	ControlledValues string              `json:"controlledValues,omitempty"`
	MinAllowed       corev1.ResourceList `json:"minAllowed,omitempty"`
	MaxAllowed       corev1.ResourceList `json:"maxAllowed,omitempty"`
}

// vpas decodes the VerticalPodAutoscalers of objs strictly, by the name of the workload they target.
func vpas(t *testing.T, objs []*unstructured.Unstructured) map[string]vpa {
	t.Helper()
	out := map[string]vpa{}
	for _, o := range objs {
		if o.GetKind() != "VerticalPodAutoscaler" {
			continue
		}
		data, err := json.Marshal(o.Object)
		require.NoError(t, err)
		var v vpa
		require.NoError(t, yaml.UnmarshalStrict(data, &v), "VerticalPodAutoscaler %s", o.GetName())
		_, dup := out[v.Spec.TargetRef.Name]
		require.False(t, dup, "two VPAs target %s", v.Spec.TargetRef.Name)
		out[v.Spec.TargetRef.Name] = v
	}
	return out
}

func TestGardenerVPAsScaleTheRequestsOfEachStatefulSet(t *testing.T) {
	objs := mustBuild(t, "overlays/gardener")
	byTarget := vpas(t, objs)
	ws := workloads(t, objs)
	require.Len(t, byTarget, len(ws), "one VPA per workload, and none for anything else")
	for _, w := range ws {
		t.Run(w.meta.Name, func(t *testing.T) {
			v, ok := byTarget[w.meta.Name]
			require.True(t, ok, "a VPA targets %s", w.meta.Name)
			assert.Equal(t, "autoscaling.k8s.io/v1", v.APIVersion)
			assert.Equal(t, w.meta.Namespace, v.Metadata.Namespace)
			assert.Equal(t, "apps/v1", v.Spec.TargetRef.APIVersion)
			assert.Equal(t, w.kind, v.Spec.TargetRef.Kind)
			assert.Equal(t, "InPlaceOrRecreate", v.Spec.UpdatePolicy.UpdateMode, "as Gardener's seed system components")
			policies := map[string]vpaContainerPolicy{}
			for _, p := range v.Spec.ResourcePolicy.ContainerPolicies {
				policies[p.ContainerName] = p
			}
			assert.Equal(t, "Off", policies["*"].Mode, "no container but dwd's is scaled")
			for _, c := range w.template.Spec.Containers {
				p, ok := policies[c.Name]
				require.True(t, ok, "a policy for container %s", c.Name)
				assertVPABounds(t, p, c)
			}
		})
	}
}

// assertVPABounds checks that a container's VPA policy scales only its requests, between bounds that
// hold its requests and never exceed its memory limit.
func assertVPABounds(t *testing.T, p vpaContainerPolicy, c corev1.Container) {
	t.Helper()
	assert.Empty(t, p.Mode, "the container is scaled (mode defaults to Auto)")
	assert.Equal(t, "RequestsOnly", p.ControlledValues, "the limit stays, and with it the Go memory limit")
	req, lim := c.Resources.Requests, c.Resources.Limits
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		max, ok := p.MaxAllowed[r]
		require.True(t, ok, "a maximum for %s", r)
		assert.LessOrEqual(t, req.Name(r, "").Cmp(max), 0, "the %s request is within the maximum", r)
		if min, ok := p.MinAllowed[r]; ok {
			assert.LessOrEqual(t, min.Cmp(*req.Name(r, "")), 0, "the %s request is above the minimum", r)
		}
	}
	assert.Contains(t, p.MinAllowed, corev1.ResourceMemory, "a memory floor")
	max := p.MaxAllowed[corev1.ResourceMemory]
	assert.LessOrEqual(t, max.Cmp(*lim.Memory()), 0, "no memory request above the limit")
}
