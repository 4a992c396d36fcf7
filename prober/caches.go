package prober

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// PartitionIndex is the field index of cached Clusters by the partition of their shoot namespace.
const PartitionIndex = "dwd.partition"

func partitionKey(p int) string { return strconv.Itoa(p) }

// IndexClusters registers the partition index on the Cluster cache; partition maps a shoot namespace
// (a Cluster's name) to its partition.
func IndexClusters(ctx context.Context, indexer client.FieldIndexer, partition func(namespace string) int) error {
	return indexer.IndexField(ctx, newCluster(), PartitionIndex, func(o client.Object) []string {
		return []string{partitionKey(partition(o.GetName()))}
	})
}

func newCluster() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ClusterGVK)
	return u
}

func newMachine() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(MachineGVK)
	return u
}

// CacheOptions are the prober's seed caches: Clusters trimmed to the Shoot fields the lifecycle rules
// read (no Seed, no CloudProfile), only the kubeconfig Secrets (by name, on the server side) with only
// their kubeconfig, and Machines trimmed to their node and phase.
func CacheOptions(cfg *config.ProberConfig) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		newCluster(): {Transform: trimCluster},
		&corev1.Secret{}: {
			Field:     fields.OneTermEqualSelector("metadata.name", cfg.KubeConfigSecretName),
			Transform: trimSecret,
		},
		newMachine(): {Transform: trimMachine},
	}
}

// shootFields are the paths of spec.shoot a Cluster keeps in the cache; workers are trimmed apart.
var shootFields = [][]string{
	{"metadata", "creationTimestamp"}, {"metadata", "deletionTimestamp"},
	{"spec", "hibernation", "enabled"},
	{"spec", "kubernetes", "kubeControllerManager", "nodeMonitorGracePeriod"},
	{"status", "isHibernated"}, {"status", "lastOperation", "type"}, {"status", "lastOperation", "state"},
	{"status", "lastOperation", "lastUpdateTime"},
}

// trimmedShootKey is the key of spec in a cached Cluster under which trimCluster keeps the Shoot
// fields the prober reads, as one JSON string: every replica caches every Cluster of the seed, and
// with the string a Cluster keeps 1,791 bytes of heap instead of 6,135 with the same fields as
// nested maps (BenchmarkCachedCluster).
const trimmedShootKey = "dwdTrimmedShoot"

// trimCluster keeps a Cluster's identity and the Shoot fields the prober reads, encoded as
// decodeShootValue would encode them; a Cluster it trimmed already stays as it is. A spec.shoot that
// is not an object is kept as it is, so that decoding reports it.
func trimCluster(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	copyIdentity(out, u)
	if exact, ok, _ := unstructured.NestedString(u.Object, "spec", trimmedShootKey); ok {
		// Trimmed before: the cache handed the transform Clusters it had trimmed (seen in the bench).
		out.Object["spec"] = map[string]any{trimmedShootKey: exact}
		return out, nil
	}
	shoot, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "shoot")
	if m, isMap := shoot.(map[string]any); isMap {
		if exact, err := encodeShootValue(trimShoot(m)); err == nil {
			out.Object["spec"] = map[string]any{trimmedShootKey: string(exact)}
			return out, nil
		}
	}
	if found {
		out.Object["spec"] = map[string]any{"shoot": shoot}
	}
	return out, nil
}

// trimShoot copies the fields of shootFields and the workers' names and node conditions.
func trimShoot(shoot map[string]any) map[string]any {
	trimmed := map[string]any{}
	for _, path := range shootFields {
		if v, found, _ := unstructured.NestedFieldNoCopy(shoot, path...); found {
			_ = unstructured.SetNestedField(trimmed, v, path...)
		}
	}
	if workers, found, _ := unstructured.NestedFieldNoCopy(shoot, "spec", "provider", "workers"); found {
		_ = unstructured.SetNestedField(trimmed, trimWorkers(workers), "spec", "provider", "workers")
	}
	return trimmed
}

// trimWorkers keeps each worker's name and node conditions.
func trimWorkers(workers any) any {
	list, ok := workers.([]any)
	if !ok {
		return workers
	}
	out := make([]any, 0, len(list))
	for _, w := range list {
		m, ok := w.(map[string]any)
		if !ok {
			out = append(out, w)
			continue
		}
		kept := map[string]any{}
		if name, found := m["name"]; found {
			kept["name"] = name
		}
		if conds, found, _ := unstructured.NestedFieldNoCopy(m, "machineControllerManager", "nodeConditions"); found {
			kept["machineControllerManager"] = map[string]any{"nodeConditions": conds}
		}
		out = append(out, kept)
	}
	return out
}

// trimMachine keeps a Machine's identity, its node label and its phase.
func trimMachine(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	copyIdentity(out, u)
	if node, ok := u.GetLabels()[MachineNodeLabel]; ok {
		out.SetLabels(map[string]string{MachineNodeLabel: node})
	}
	if phase, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "currentStatus", "phase"); found {
		out.Object["status"] = map[string]any{"currentStatus": map[string]any{"phase": phase}}
	}
	return out, nil
}

// trimSecret keeps a Secret's identity and its kubeconfig.
func trimSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	out := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion}}
	if data, ok := s.Data[KubeconfigKey]; ok {
		out.Data = map[string][]byte{KubeconfigKey: data}
	}
	return out, nil
}

// copyIdentity copies the metadata a trimmed object keeps.
func copyIdentity(dst, src *unstructured.Unstructured) {
	dst.SetName(src.GetName())
	dst.SetNamespace(src.GetNamespace())
	dst.SetUID(src.GetUID())
	dst.SetResourceVersion(src.GetResourceVersion())
	dst.SetCreationTimestamp(src.GetCreationTimestamp())
	dst.SetDeletionTimestamp(src.GetDeletionTimestamp())
}

// shootOf decodes the Shoot kept in a cached Cluster.
func shootOf(cluster *unstructured.Unstructured) (*Shoot, error) {
	if exact, ok, _ := unstructured.NestedString(cluster.Object, "spec", trimmedShootKey); ok {
		return decodeShootJSON([]byte(exact))
	}
	raw, found, err := unstructured.NestedFieldNoCopy(cluster.Object, "spec", "shoot")
	if err != nil || !found {
		return nil, fmt.Errorf("cluster %s has no spec.shoot", cluster.GetName())
	}
	if raw == nil {
		return nil, errEmptyShoot
	}
	return decodeShootValue(raw)
}

// machineInfo reads what the candidate rules need from a cached Machine.
func machineInfo(u *unstructured.Unstructured) MachineInfo {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "currentStatus", "phase")
	// The one label, not a copy of them all (GetLabels copies): every probe reads every Machine.
	node, _, _ := unstructured.NestedString(u.Object, "metadata", "labels", MachineNodeLabel)
	return MachineInfo{Name: u.GetName(), Node: node, Phase: phase}
}
