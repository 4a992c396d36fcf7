package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// namespaces are where an overlay deploys: the namespace of its pods and everything else, and the
// namespace of its sharding Leases, which holds only the Roles and RoleBindings for them when it is
// another.
type namespaces struct{ pods, shards string }

// overlayNamespaces are the namespaces of each overlay.
var overlayNamespaces = map[string]namespaces{
	"overlays/gardener": {pods: "garden", shards: "dwd-shards"},
	"overlays/sharded":  {pods: "dwd-system", shards: "dwd-system"},
	"overlays/single":   {pods: "dwd-system", shards: "dwd-system"},
}

// preexisting are the namespaces an overlay may use without creating them: garden is Gardener's.
var preexisting = map[string]bool{"garden": true}

// buildNamespaces are the namespaces of a test build: its overlay's.
func buildNamespaces(name string) namespaces {
	overlay, _, _ := strings.Cut(name, "+")
	return overlayNamespaces[overlay]
}

// buildNamespace is the namespace of a test build's pods.
func buildNamespace(name string) string {
	return buildNamespaces(name).pods
}

// clusterScoped are the kinds of the tree that have no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"FlowSchema": true, "PriorityLevelConfiguration": true, "ClusterFilter": true, "ClusterParser": true}

// mustBuild builds a kustomization of the tree for a test.
func mustBuild(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Build(path)
	require.NoError(t, err)
	return objs
}

// workload is a StatefulSet or a Deployment of a build: what runs dwd.
type workload struct {
	kind string
	meta metav1.ObjectMeta
	// serviceName is a StatefulSet's governing Service.
	serviceName string
	replicas    *int32
	selector    *metav1.LabelSelector
	template    corev1.PodTemplateSpec
}

// workloads returns the StatefulSets and Deployments of objs.
func workloads(t *testing.T, objs []*unstructured.Unstructured) []workload {
	t.Helper()
	var out []workload
	for _, sts := range typed[appsv1.StatefulSet](t, objs, "StatefulSet") {
		out = append(out, workload{kind: "StatefulSet", meta: sts.ObjectMeta, serviceName: sts.Spec.ServiceName,
			replicas: sts.Spec.Replicas, selector: sts.Spec.Selector, template: sts.Spec.Template})
	}
	for _, d := range typed[appsv1.Deployment](t, objs, "Deployment") {
		out = append(out, workload{kind: "Deployment", meta: d.ObjectMeta, replicas: d.Spec.Replicas,
			selector: d.Spec.Selector, template: d.Spec.Template})
	}
	return out
}

// typed converts the objects of a kind to their Go type, failing on fields the type does not have.
func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) []*T {
	t.Helper()
	var out []*T
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		v := new(T)
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, v, true),
			"%s %s", kind, o.GetName())
		out = append(out, v)
	}
	return out
}

func configMaps(t *testing.T, objs []*unstructured.Unstructured) []*corev1.ConfigMap {
	return typed[corev1.ConfigMap](t, objs, "ConfigMap")
}

func budgets(t *testing.T, objs []*unstructured.Unstructured) []*policyv1.PodDisruptionBudget {
	return typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget")
}

// rules returns the rules of every Role and ClusterRole of objs, by roleKey.
func rules(t *testing.T, objs []*unstructured.Unstructured) map[string][]rbacv1.PolicyRule {
	out := map[string][]rbacv1.PolicyRule{}
	for _, r := range typed[rbacv1.Role](t, objs, "Role") {
		out[roleKey("Role", r.Namespace, r.Name)] = r.Rules
	}
	for _, r := range typed[rbacv1.ClusterRole](t, objs, "ClusterRole") {
		out[roleKey("ClusterRole", "", r.Name)] = r.Rules
	}
	return out
}

// roleKey names a role in what rules returns: "ClusterRole/dwd", "Role/garden/dwd-prober". Roles of
// the same name in two namespaces are two roles.
func roleKey(kind, namespace, name string) string {
	if kind == "Role" {
		return kind + "/" + namespace + "/" + name
	}
	return kind + "/" + name
}

// refKey is the roleKey of the role a binding in namespace refers to.
func refKey(ref rbacv1.RoleRef, namespace string) string {
	return roleKey(ref.Kind, namespace, ref.Name)
}

// containerNamed returns the container of a pod template with the given name.
func containerNamed(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}
