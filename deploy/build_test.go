package deploy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOverlays(t *testing.T) {
	assert.Equal(t, []string{"overlays/gardener", "overlays/sharded", "overlays/single"}, Overlays())
}

func TestEveryOverlayBuildsIntoItsNamespace(t *testing.T) {
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			objs := mustBuild(t, overlay)
			ns, ok := overlayNamespaces[overlay]
			require.True(t, ok, "give the overlay's namespace in overlayNamespaces")
			require.NotEmpty(t, workloads(t, objs), "the overlay runs dwd")
			for _, o := range objs {
				if clusterScoped[o.GetKind()] {
					assert.Empty(t, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
				} else {
					assert.Equal(t, ns, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
				}
			}
		})
	}
}

func TestBuildOrdersNamespacesAndRBACFirst(t *testing.T) {
	objs := mustBuild(t, "overlays/sharded")
	assert.Equal(t, "Namespace", objs[0].GetKind(), "a Namespace is applied before what it holds")
	assert.Equal(t, "StatefulSet", objs[len(objs)-2].GetKind())
	assert.Equal(t, "PodDisruptionBudget", objs[len(objs)-1].GetKind())
}

func TestBuildRefusesWhatIsNoKustomizationOfTheTree(t *testing.T) {
	for _, path := range []string{"", "/overlays/sharded", "../deploy/overlays/sharded", "overlays", "overlays/nowhere", "base/prober.yaml"} {
		t.Run(path, func(t *testing.T) {
			_, err := Build(path)
			assert.Error(t, err)
		})
	}
}

func TestBuildNamesTheOverlaysOfAMissingPath(t *testing.T) {
	_, err := Build("overlays/shardd")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "overlays/sharded")
}
