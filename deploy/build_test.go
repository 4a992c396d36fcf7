package deploy

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestOverlays(t *testing.T) {
	assert.Equal(t, []string{"overlays/gardener", "overlays/sharded", "overlays/single"}, Overlays())
}

func TestEveryOverlayBuildsIntoItsNamespaces(t *testing.T) {
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			objs := mustBuild(t, overlay)
			ns, ok := overlayNamespaces[overlay]
			require.True(t, ok, "give the overlay's namespaces in overlayNamespaces")
			require.NotEmpty(t, workloads(t, objs), "the overlay runs dwd")
			created := map[string]bool{}
			for _, o := range objs {
				switch {
				case clusterScoped[o.GetKind()]:
					assert.Empty(t, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
					if o.GetKind() == "Namespace" {
						created[o.GetName()] = true
					}
				case o.GetNamespace() == ns.shards && (o.GetKind() == "Role" || o.GetKind() == "RoleBinding"):
					// The Leases' RBAC, in the shard namespace (TestLeasesAreGrantedOnlyInTheShardNamespace).
				default:
					assert.Equal(t, ns.pods, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
				}
			}
			want := map[string]bool{}
			for _, name := range []string{ns.pods, ns.shards} {
				if !preexisting[name] {
					want[name] = true
				}
			}
			assert.Equal(t, want, created, "the overlay creates the namespaces it uses, but for a seed's own")
		})
	}
}

func TestBuildOrdersNamespacesAndRBACFirst(t *testing.T) {
	objs := mustBuild(t, "overlays/sharded")
	assert.Equal(t, "Namespace", objs[0].GetKind(), "a Namespace is applied before what it holds")
	// kustomize puts the kinds it does not order (API Priority and Fairness's) last.
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "FlowSchema" || o.GetKind() == "PriorityLevelConfiguration"
	})
	assert.Equal(t, "StatefulSet", objs[len(objs)-2].GetKind())
	assert.Equal(t, "PodDisruptionBudget", objs[len(objs)-1].GetKind())
}

func TestEveryNamespaceComesBeforeWhatItHolds(t *testing.T) {
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			seen := map[string]bool{}
			for _, o := range mustBuild(t, overlay) {
				if o.GetKind() == "Namespace" {
					seen[o.GetName()] = true
				}
				if ns := o.GetNamespace(); ns != "" && !preexisting[ns] {
					assert.True(t, seen[ns], "%s %s/%s comes after its Namespace, for `kubectl apply -k`", o.GetKind(), ns, o.GetName())
				}
			}
		})
	}
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
