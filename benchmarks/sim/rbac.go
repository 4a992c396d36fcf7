package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/deploy"
)

// Grants are the RBAC objects processes run under, and where they come from.
type Grants struct {
	Source  string // for the output: "deploy/overlays/sharded"
	Objects []*unstructured.Unstructured
}

// OverlayGrants builds the deploy/ overlay at path and keeps its RBAC.
func OverlayGrants(path string) (Grants, error) {
	objs, err := deploy.Build(path)
	if err != nil {
		return Grants{}, err
	}
	return Grants{Source: "deploy/" + path, Objects: rbacOnly(objs)}, nil
}

// Identity is who processes run as after Seed.Grant: a ServiceAccount, by impersonation.
type Identity struct {
	// Namespace is the ServiceAccount's, which becomes the replicas' own (their Leases').
	Namespace string
	// User is the name the API server authenticates the ServiceAccount as.
	User string
	// Kubeconfig is the path of a kubeconfig whose user impersonates the ServiceAccount.
	Kubeconfig string
}

// Grant applies g in the seed and writes a kubeconfig, file in Dir, whose user impersonates g's only
// ServiceAccount: the API server then authorizes whoever uses it by g alone.
func (s *Seed) Grant(ctx context.Context, g Grants, file string) (Identity, error) {
	ns, user, err := ServiceAccountUser(g.Objects)
	if err != nil {
		return Identity{}, fmt.Errorf("%s: %w", g.Source, err)
	}
	if err := ApplyRBAC(ctx, s.Env.Client, g.Objects); err != nil {
		return Identity{}, fmt.Errorf("%s: %w", g.Source, err)
	}
	kubeconfig, err := s.WriteKubeconfigAs(file, user)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Namespace: ns, User: user, Kubeconfig: kubeconfig}, nil
}

// rbacKinds are the kinds that make up what a ServiceAccount may do: the account and the roles bound
// to it. The rest of a set of manifests (workloads, configs) is no part of it.
var rbacKinds = []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// rbacOnly returns the objects of objs whose kind is one of rbacKinds, in their order.
func rbacOnly(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAPIVersion() == "v1" && o.GetKind() == "ServiceAccount" ||
			o.GroupVersionKind().Group == rbacv1.GroupName && slices.Contains(rbacKinds, o.GetKind()) {
			out = append(out, o)
		}
	}
	return out
}

// ApplyRBAC creates the RBAC objects of objs in the seed, after the namespaces they live in (created
// unless they exist). The other objects of objs are left out.
func ApplyRBAC(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	rbac := rbacOnly(objs)
	if len(rbac) == 0 {
		return errors.New("no ServiceAccount, role or binding among the objects")
	}
	for _, o := range rbac {
		if ns := o.GetNamespace(); ns != "" {
			err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating namespace %s: %w", ns, err)
			}
		}
	}
	for _, o := range rbac {
		if err := c.Create(ctx, o.DeepCopy()); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), client.ObjectKeyFromObject(o), err)
		}
	}
	return nil
}

// ServiceAccountUser returns the namespace of the only ServiceAccount among objs and the user name
// the API server authenticates it as, system:serviceaccount:<namespace>:<name>.
func ServiceAccountUser(objs []*unstructured.Unstructured) (namespace, user string, err error) {
	var accounts []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAPIVersion() == "v1" && o.GetKind() == "ServiceAccount" {
			accounts = append(accounts, o)
		}
	}
	if len(accounts) != 1 {
		return "", "", fmt.Errorf("want exactly one ServiceAccount, found %d", len(accounts))
	}
	sa := accounts[0]
	if sa.GetNamespace() == "" {
		return "", "", fmt.Errorf("ServiceAccount %s has no namespace", sa.GetName())
	}
	return sa.GetNamespace(), ServiceAccountName(sa.GetNamespace(), sa.GetName()), nil
}

// ServiceAccountName is the user name the API server gives the ServiceAccount namespace/name.
func ServiceAccountName(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// CountRules is the number of rules of the roles among objs.
func CountRules(objs []*unstructured.Unstructured) int {
	n := 0
	for _, o := range rbacOnly(objs) {
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		n += len(rules)
	}
	return n
}
