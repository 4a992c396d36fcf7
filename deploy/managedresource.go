package deploy

import (
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Gardener's conventions for a seed system component's ManagedResource (gardener/gardener,
// pkg/utils/managedresources: NewForSeed, CreateForSeed, and the constants they use).
const (
	// SeedResourceClass is the class of the ManagedResources the seed's gardener-resource-manager
	// applies.
	SeedResourceClass = "seed"
	// seedSystemComponentRole is the label by which the seed's care controller counts a
	// ManagedResource among the seed system components whose health makes the seed's.
	seedRoleLabel, seedSystemComponentRole = "gardener.cloud/role", "seed-system-component"
	// managedResourceSecretPrefix is the prefix of the name of the Secret a ManagedResource refers to.
	managedResourceSecretPrefix = "managedresource-"
	// maxSecretBytes is the most a Secret's data may hold.
	maxSecretBytes = 1 << 20
)

// ManagedResource returns objs as a seed ManagedResource named name in namespace and the Secret that
// holds them (managedresource-<name>, one key per object, <kind>__<namespace>__<name>.yaml), the
// Secret first: gardener-resource-manager then applies the objects, corrects any drift from them and
// reports their health in the ManagedResource's conditions, which the seed's health includes. The
// ManagedResource has the class seed and the label gardener.cloud/role: seed-system-component, and
// does not keep its objects when deleted.
func ManagedResource(name, namespace string, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	data, err := managedResourceData(objs)
	if err != nil {
		return nil, fmt.Errorf("ManagedResource %s/%s: %w", namespace, name, err)
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: managedResourceSecretPrefix + name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/name": "dwd"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	mr := map[string]any{
		"apiVersion": "resources.gardener.cloud/v1alpha1",
		"kind":       "ManagedResource",
		"metadata": map[string]any{"name": name, "namespace": namespace,
			"labels": map[string]any{"app.kubernetes.io/name": "dwd", seedRoleLabel: seedSystemComponentRole}},
		"spec": map[string]any{
			"class":       SeedResourceClass,
			"secretRefs":  []any{map[string]any{"name": secret.Name}},
			"keepObjects": false,
		},
	}
	s, err := runtime.DefaultUnstructuredConverter.ToUnstructured(secret)
	if err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{{Object: s}, {Object: mr}}, nil
}

// managedResourceData encodes every object as YAML under a key of its own.
func managedResourceData(objs []*unstructured.Unstructured) (map[string][]byte, error) {
	data := make(map[string][]byte, len(objs))
	size := 0
	for _, o := range objs {
		key := strings.ToLower(o.GetKind()) + "__" + o.GetNamespace() + "__" + strings.ReplaceAll(o.GetName(), ":", "_") + ".yaml"
		if _, dup := data[key]; dup {
			return nil, fmt.Errorf("two objects are %s", key)
		}
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		data[key] = y
		size += len(key) + len(y)
	}
	if size > maxSecretBytes {
		return nil, fmt.Errorf("the objects take %d bytes, more than a Secret holds (%d)", size, maxSecretBytes)
	}
	return data, nil
}

// BuildDir builds the kustomization in the directory dir of the local file system as Build builds one
// of the tree: a kustomization of the user's, which may list the tree's overlays and components.
func BuildDir(dir string) ([]*unstructured.Unstructured, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return build(filesys.MakeFsOnDisk(), strings.TrimPrefix(abs, "/"))
}
