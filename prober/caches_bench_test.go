package prober

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// benchClusterJSON is a Cluster as the API server sends it: a Shoot with three worker pools, its
// Seed and CloudProfile (which the cache drops).
func benchClusterJSON(i int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"extensions.gardener.cloud/v1alpha1","kind":"Cluster",
"metadata":{"name":"shoot--project-%[1]d--name","uid":"3b0d6c1e-5f0a-4d7e-9a4b-%012[1]d","resourceVersion":"%[1]d","creationTimestamp":"2026-01-01T00:00:00Z"},
"spec":{"cloudProfile":{"apiVersion":"core.gardener.cloud/v1beta1","kind":"CloudProfile"},"seed":{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed"},
"shoot":{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"name","namespace":"garden-project-%[1]d","creationTimestamp":"2026-01-01T00:00:00Z"},
"spec":{"hibernation":{"enabled":false},"kubernetes":{"version":"1.33.4","kubeControllerManager":{"nodeMonitorGracePeriod":"40s"}},
"provider":{"type":"aws","workers":[
{"name":"pool-a","machine":{"type":"m5.large"},"minimum":1,"maximum":5,"machineControllerManager":{"nodeConditions":["KernelDeadlock","ReadonlyFilesystem"]}},
{"name":"pool-b","machine":{"type":"m5.xlarge"},"minimum":0,"maximum":3},
{"name":"pool-c","machine":{"type":"m5.2xlarge"},"minimum":0,"maximum":2}]}},
"status":{"isHibernated":false,"lastOperation":{"type":"Reconcile","state":"Succeeded","lastUpdateTime":"2026-11-28T10:00:00Z","progress":100}}}}}`, i)
}

// BenchmarkCachedCluster measures what one Cluster costs in the prober's cache, which holds every
// Cluster of the seed in every replica: the heap a trimmed Cluster keeps (kept-B/cluster, over 5,000
// Clusters decoded as the informer decodes them), and the time to trim one and to decode its Shoot as
// each sync of a shoot does.
func BenchmarkCachedCluster(b *testing.B) {
	const n = 5000
	kept := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range kept {
		u := &unstructured.Unstructured{}
		require.NoError(b, u.UnmarshalJSON(benchClusterJSON(i)))
		trimmed, err := trimCluster(u)
		require.NoError(b, err)
		kept[i] = trimmed
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	keptPerCluster := float64(after.HeapAlloc-before.HeapAlloc) / n
	runtime.KeepAlive(kept)

	raw := &unstructured.Unstructured{}
	require.NoError(b, raw.UnmarshalJSON(benchClusterJSON(0)))
	b.ResetTimer()
	for b.Loop() {
		trimmed, err := trimCluster(raw)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := shootOf(trimmed.(*unstructured.Unstructured)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(keptPerCluster, "kept-B/cluster")
}
