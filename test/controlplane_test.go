package test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var env *Environment

func TestMain(m *testing.M) { os.Exit(Main(m, &env)) }

func TestCRDsDecode(t *testing.T) {
	crds, err := CRDs()
	require.NoError(t, err)
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		names = append(names, crd.Name)
	}
	assert.ElementsMatch(t, []string{"clusters.extensions.gardener.cloud", "machines.machine.sapcloud.io"}, names)
}

func TestClusterAndMachine(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	cluster := newObject("extensions.gardener.cloud/v1alpha1", "Cluster", "", ns)
	cluster.Object["spec"] = map[string]any{
		"cloudProfile": map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile"},
		"seed":         map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Seed"},
		"shoot": map[string]any{
			"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
			"spec": map[string]any{"hibernation": map[string]any{"enabled": false}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, cluster))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })

	got := newObject("extensions.gardener.cloud/v1alpha1", "Cluster", "", "")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: ns}, got))
	enabled, found, err := unstructured.NestedBool(got.Object, "spec", "shoot", "spec", "hibernation", "enabled")
	require.NoError(t, err)
	assert.True(t, found, "spec.shoot must be kept as opaque JSON")
	assert.False(t, enabled)

	machine := newObject("machine.sapcloud.io/v1alpha1", "Machine", ns, "machine-0")
	machine.SetLabels(map[string]string{"node": "node-0"})
	machine.Object["spec"] = map[string]any{"class": map[string]any{"kind": "MachineClass", "name": "any"}}
	require.NoError(t, env.Client.Create(ctx, machine))
	require.NoError(t, unstructured.SetNestedField(machine.Object, "Running", "status", "currentStatus", "phase"))
	require.NoError(t, env.Client.Status().Update(ctx, machine))

	got = newObject("machine.sapcloud.io/v1alpha1", "Machine", "", "")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "machine-0"}, got))
	phase, _, err := unstructured.NestedString(got.Object, "status", "currentStatus", "phase")
	require.NoError(t, err)
	assert.Equal(t, "Running", phase, "status.currentStatus.phase goes through the status subresource")
}

func newObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}
