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

// overlayNamespaces is the namespace each overlay deploys into.
var overlayNamespaces = map[string]string{
	"overlays/gardener": "garden",
	"overlays/sharded":  "dwd-system",
	"overlays/single":   "dwd-system",
}

// buildNamespace is the namespace of a test build: its overlay's.
func buildNamespace(name string) string {
	overlay, _, _ := strings.Cut(name, "+")
	return overlayNamespaces[overlay]
}

// clusterScoped are the kinds of the tree that have no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true}

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

// rules returns the rules of every Role and ClusterRole of objs, by "Kind/name".
func rules(t *testing.T, objs []*unstructured.Unstructured) map[string][]rbacv1.PolicyRule {
	out := map[string][]rbacv1.PolicyRule{}
	for _, r := range typed[rbacv1.Role](t, objs, "Role") {
		out["Role/"+r.Name] = r.Rules
	}
	for _, r := range typed[rbacv1.ClusterRole](t, objs, "ClusterRole") {
		out["ClusterRole/"+r.Name] = r.Rules
	}
	return out
}

// grant is one verb on one resource that a rule allows.
type grant struct{ group, resource, verb string }

// grants flattens rules into what they allow (resource rules only).
func grants(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[grant{g, res, v}] = true
				}
			}
		}
	}
	return out
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
