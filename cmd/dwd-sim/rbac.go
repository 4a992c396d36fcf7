package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/deploy"
)

// grants are the RBAC objects replicas run under, and where they come from.
type grants struct {
	source string // for the output: "deploy/overlays/sharded"
	objs   []*unstructured.Unstructured
}

// overlayGrants builds the deploy/ overlay at path and keeps its RBAC.
func overlayGrants(path string) (grants, error) {
	objs, err := deploy.Build(path)
	if err != nil {
		return grants{}, err
	}
	return grants{source: "deploy/" + path, objs: rbacOnly(objs)}, nil
}

// grant applies g in the seed and writes the replicas' kubeconfig, whose user impersonates g's only
// ServiceAccount: the API server then authorizes the replicas by g alone. The replicas' namespace
// becomes the ServiceAccount's.
func (d *demo) grant(ctx context.Context, g grants) error {
	ns, user, err := serviceAccountUser(g.objs)
	if err != nil {
		return fmt.Errorf("%s: %w", g.source, err)
	}
	if err := applyRBAC(ctx, d.seed.Env.Client, g.objs); err != nil {
		return fmt.Errorf("%s: %w", g.source, err)
	}
	if d.kubeconfig, err = d.seed.WriteKubeconfigAs("replicas.kubeconfig", user); err != nil {
		return err
	}
	d.namespace = ns
	fmt.Fprintf(d.out, "The replicas run as %s (impersonated), with exactly the permissions of %s (%d rules)\n",
		user, g.source, countRules(g.objs))
	return nil
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

// applyRBAC creates the RBAC objects of objs in the seed, after the namespaces they live in (created
// unless they exist). The other objects of objs are left out.
func applyRBAC(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
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

// serviceAccountUser returns the namespace of the only ServiceAccount among objs and the user name
// the API server authenticates it as, system:serviceaccount:<namespace>:<name>.
func serviceAccountUser(objs []*unstructured.Unstructured) (namespace, user string, err error) {
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
	return sa.GetNamespace(), serviceAccountName(sa.GetNamespace(), sa.GetName()), nil
}

// serviceAccountName is the user name the API server gives the ServiceAccount namespace/name.
func serviceAccountName(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// countRules is the number of rules of the roles among objs.
func countRules(objs []*unstructured.Unstructured) int {
	n := 0
	for _, o := range rbacOnly(objs) {
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		n += len(rules)
	}
	return n
}

// readManifests decodes a file of YAML documents into objects; empty documents are skipped.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d has no kind or name", path, doc)
		}
		objs = append(objs, obj)
	}
}

// withoutVerbs returns a copy of objs in which the Role or ClusterRole kind/name grants none of verbs
// on resource in group: the verbs are taken out of every rule that grants them there, a rule left
// with no verb is dropped, and the rule's other resources keep what they had. It fails when that role
// granted none of them, so that a variant cannot take out a rule that was never there.
func withoutVerbs(objs []*unstructured.Unstructured, kind, name, group, resource string, verbs ...string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	found := false
	for i, o := range objs {
		out[i] = o.DeepCopy()
		if o.GetKind() != kind || o.GetName() != name || o.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		var role struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, name, err)
		}
		rules, removed, err := dropVerbs(role.Rules, group, resource, verbs)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, name, err)
		}
		if !removed {
			continue
		}
		found = true
		encoded, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}{rules})
		if err != nil {
			return nil, err
		}
		out[i].Object["rules"] = encoded["rules"]
	}
	if !found {
		return nil, fmt.Errorf("%s %s grants none of %v on %s in group %q", kind, name, verbs, resource, group)
	}
	return out, nil
}

// dropVerbs takes verbs on resource in group out of rules; removed says whether a rule granted one.
func dropVerbs(rules []rbacv1.PolicyRule, group, resource string, verbs []string) ([]rbacv1.PolicyRule, bool, error) {
	var out []rbacv1.PolicyRule
	removed := false
	for _, r := range rules {
		grants := slices.ContainsFunc(r.Verbs, func(v string) bool { return slices.Contains(verbs, v) })
		if !slices.Contains(r.APIGroups, group) || !slices.Contains(r.Resources, resource) || !grants {
			out = append(out, r)
			continue
		}
		if len(r.APIGroups) != 1 {
			return nil, false, fmt.Errorf("a rule for %s spans the groups %v: take it apart by hand", resource, r.APIGroups)
		}
		removed = true
		if others := slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == resource }); len(others) > 0 {
			rest := *r.DeepCopy()
			rest.Resources = others
			out = append(out, rest)
		}
		if kept := slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return slices.Contains(verbs, v) }); len(kept) > 0 {
			less := *r.DeepCopy()
			less.Resources, less.Verbs = []string{resource}, kept
			out = append(out, less)
		}
	}
	return out, removed, nil
}
