package deploy

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// managedResourceSpec is the spec of a resources.gardener.cloud/v1alpha1 ManagedResource as rendered;
// decoding into it strictly fails on any other field.
type managedResourceSpec struct {
	Class       string                        `json:"class"`
	SecretRefs  []corev1.LocalObjectReference `json:"secretRefs"`
	KeepObjects bool                          `json:"keepObjects"`
}

// renderedManagedResource renders a build as the ManagedResource dwd in garden and returns its spec, its
// Secret and the objects the Secret holds.
func renderedManagedResource(t *testing.T, objs []*unstructured.Unstructured) (*unstructured.Unstructured, *corev1.Secret, []*unstructured.Unstructured) {
	t.Helper()
	rendered, err := ManagedResource("dwd", "garden", objs)
	require.NoError(t, err)
	require.Len(t, rendered, 2)
	require.Equal(t, "Secret", rendered[0].GetKind(), "the Secret first: the ManagedResource refers to it")
	secrets := typed[corev1.Secret](t, rendered, "Secret")
	require.Len(t, secrets, 1)
	var inner []*unstructured.Unstructured
	for key, data := range secrets[0].Data {
		j, err := yaml.YAMLToJSON(data)
		require.NoError(t, err, key)
		o := &unstructured.Unstructured{}
		require.NoError(t, o.UnmarshalJSON(j), key)
		inner = append(inner, o)
	}
	return rendered[1], secrets[0], inner
}

func TestManagedResourceIsASeedSystemComponentsHoldingEveryObject(t *testing.T) {
	objs := mustBuild(t, "overlays/gardener")
	mr, secret, inner := renderedManagedResource(t, objs)
	assert.Equal(t, "resources.gardener.cloud/v1alpha1", mr.GetAPIVersion())
	assert.Equal(t, "ManagedResource", mr.GetKind())
	assert.Equal(t, "garden", mr.GetNamespace(), "the seed's health looks at the ManagedResources in garden")
	assert.Equal(t, "seed-system-component", mr.GetLabels()["gardener.cloud/role"])
	spec, _, err := unstructured.NestedMap(mr.Object, "spec")
	require.NoError(t, err)
	data, err := yaml.Marshal(spec)
	require.NoError(t, err)
	var s managedResourceSpec
	require.NoError(t, yaml.UnmarshalStrict(data, &s))
	assert.Equal(t, managedResourceSpec{Class: "seed", SecretRefs: []corev1.LocalObjectReference{{Name: secret.Name}}}, s)
	assert.Equal(t, "garden", secret.Namespace)
	assert.Equal(t, "managedresource-dwd", secret.Name)

	want := map[string]map[string]any{}
	for _, o := range objs {
		want[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.Object
	}
	got := map[string]map[string]any{}
	for _, o := range inner {
		got[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.Object
	}
	assert.Equal(t, want, got, "the Secret holds every object of the build, unchanged")
}

func TestManagedResourceRefusesWhatASecretCannotHold(t *testing.T) {
	big := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "big", "namespace": "garden"},
		"data":     map[string]any{"x": strings.Repeat("x", maxSecretBytes)}}}
	_, err := ManagedResource("dwd", "garden", []*unstructured.Unstructured{big})
	assert.ErrorContains(t, err, "more than a Secret holds")
	small := big.DeepCopy()
	small.Object["data"] = map[string]any{"x": "x"}
	_, err = ManagedResource("dwd", "garden", []*unstructured.Unstructured{small, small.DeepCopy()})
	assert.ErrorContains(t, err, "two objects")
}

// TestManagedResourceAndItsObjectsApplyToTheAPIServer applies the ManagedResource and its Secret, then
// every object the Secret holds, as gardener-resource-manager would, to the test API server (dry
// runs), for the overlay alone and with its monitoring and components/metrics-auth.
func TestManagedResourceAndItsObjectsApplyToTheAPIServer(t *testing.T) {
	requireDeployCRDs(t)
	ctx := context.Background()
	c, warned := warningClient(t)
	name, withAuth := withMetricsAuth(t, "overlays/gardener")
	for build, objs := range map[string][]*unstructured.Unstructured{"overlays/gardener": mustBuild(t, "overlays/gardener"), name: withAuth} {
		t.Run(build, func(t *testing.T) {
			mr, _, inner := renderedManagedResource(t, objs)
			rendered, err := ManagedResource("dwd", "garden", objs)
			require.NoError(t, err)
			createNamespaces(t, append(inner, mr))
			createPriorityClasses(t, inner)
			warned.take()
			for _, o := range append(rendered, inner...) {
				assert.NoError(t, dryRunApply(ctx, c, o), "%s %s", o.GetKind(), o.GetName())
				assert.Empty(t, warned.take(), "%s %s: the API server warns", o.GetKind(), o.GetName())
			}
		})
	}
}
