package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

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
