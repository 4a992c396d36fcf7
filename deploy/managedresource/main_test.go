package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestRunPrintsTheManagedResourceOfAKustomizationOnDisk(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, options{kustomization: "../overlays/gardener", name: "dwd", namespace: "garden"}.run(&out))
	var kinds []string
	for _, doc := range strings.Split(out.String(), "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		o := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o.Object))
		kinds = append(kinds, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	assert.Equal(t, []string{"Secret/garden/managedresource-dwd", "ManagedResource/garden/dwd"}, kinds)
}

func TestRunFailsOnADirectoryWithoutAKustomization(t *testing.T) {
	assert.Error(t, options{kustomization: t.TempDir(), name: "dwd", namespace: "garden"}.run(&bytes.Buffer{}))
}
