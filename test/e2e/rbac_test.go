package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

func rulesOf(t *testing.T, objs []*unstructured.Unstructured, kind, name string) []rbacv1.PolicyRule {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			role := &rbacv1.ClusterRole{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role))
			return role.Rules
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

func TestGardenerRBACFile(t *testing.T) {
	objs, err := readManifests(gardenerRBACFile)
	require.NoError(t, err)
	require.Len(t, objs, 10, "per role a ServiceAccount, a ClusterRole, a Role and their bindings")
	for _, o := range objs {
		assert.Contains(t, []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}, o.GetKind())
	}
	assert.Equal(t, 12, sim.CountRules(objs))
	_, _, err = sim.ServiceAccountUser(objs)
	assert.Error(t, err, "two ServiceAccounts: which one is ambiguous")
	for _, o := range objs {
		if o.GetKind() == "Role" || o.GetKind() == "RoleBinding" || o.GetKind() == "ServiceAccount" {
			assert.Equal(t, gardenNamespace, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
	}
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	}, rulesOf(t, objs, "ClusterRole", "gardener.cloud:dependency-watchdog-weeder"))
}

func TestWithoutVerbs(t *testing.T) {
	objs, err := readManifests(gardenerRBACFile)
	require.NoError(t, err)
	less, err := withoutVerbs(objs, "ClusterRole", "gardener.cloud:dependency-watchdog-prober", "", "secrets", "list", "watch")
	require.NoError(t, err)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"extensions.gardener.cloud"}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{"machine.sapcloud.io"}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "watch"}},
	}, rulesOf(t, less, "ClusterRole", "gardener.cloud:dependency-watchdog-prober"))
	assert.Equal(t, rulesOf(t, objs, "Role", "gardener.cloud:dependency-watchdog-prober"), rulesOf(t, less, "Role", "gardener.cloud:dependency-watchdog-prober"),
		"other roles keep their rules")
	assert.Len(t, rulesOf(t, objs, "ClusterRole", "gardener.cloud:dependency-watchdog-prober"), 4, "the objects given stay as they were")

	none, err := withoutVerbs(objs, "Role", "gardener.cloud:dependency-watchdog-weeder", "", "events", "create", "get", "update", "patch")
	require.NoError(t, err)
	assert.Len(t, rulesOf(t, none, "Role", "gardener.cloud:dependency-watchdog-weeder"), 2, "a rule left with no verb goes")

	_, err = withoutVerbs(objs, "ClusterRole", "gardener.cloud:dependency-watchdog-prober", "", "secrets", "delete")
	assert.Error(t, err, "a verb the role does not grant")
	_, err = withoutVerbs(objs, "ClusterRole", "nobody", "", "secrets", "list")
	assert.Error(t, err, "a role that is not there")
}

func TestReadManifestsReportsBadDocuments(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n---\nkind: [\n"), 0o600))
	_, err := readManifests(bad)
	assert.ErrorContains(t, err, "document 2")
	unnamed := filepath.Join(dir, "unnamed.yaml")
	require.NoError(t, os.WriteFile(unnamed, []byte("apiVersion: v1\nkind: ServiceAccount\n"), 0o600))
	_, err = readManifests(unnamed)
	assert.ErrorContains(t, err, "no kind or name")
	_, err = readManifests(filepath.Join(dir, "missing.yaml"))
	assert.Error(t, err)
}
