package deploy

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// tree holds the kustomizations this package builds.
//
//go:embed base overlays components grafana prometheus
var tree embed.FS

// overlaysDir holds one directory per deployable overlay.
const overlaysDir = "overlays"

// Build builds the kustomization at path, a directory of this tree such as "overlays/sharded", with
// the kustomize API as `kubectl kustomize` builds it (no plugins, files only from inside each
// kustomization's root), and returns its objects in kustomize's legacy order, which applies
// Namespaces and RBAC before the workloads that need them.
func Build(path string) ([]*unstructured.Unstructured, error) {
	dir, err := cleanPath(path)
	if err != nil {
		return nil, err
	}
	mem, err := inMemory()
	if err != nil {
		return nil, err
	}
	return build(mem, dir)
}

// build builds the kustomization in the directory dir of mem.
func build(mem filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	resources, err := krusty.MakeKustomizer(opts).Run(mem, "/"+dir)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", dir, err)
	}
	objs := make([]*unstructured.Unstructured, 0, resources.Size())
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("building %s: %s: %w", dir, r.CurId(), err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("building %s: %s: %w", dir, r.CurId(), err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// Overlays returns the paths of the overlays, for Build: "overlays/gardener", "overlays/sharded", ...
func Overlays() []string {
	entries, err := fs.ReadDir(tree, overlaysDir)
	if err != nil {
		panic(err) // the directory is embedded: it is there
	}
	var paths []string
	for _, e := range entries {
		if e.IsDir() {
			paths = append(paths, overlaysDir+"/"+e.Name())
		}
	}
	return paths
}

// cleanPath checks that p names a kustomization of this tree and returns it cleaned.
func cleanPath(p string) (string, error) {
	dir := path.Clean(p)
	if p == "" || path.IsAbs(dir) || dir == ".." || strings.HasPrefix(dir, "../") {
		return "", fmt.Errorf("kustomization %q: want a directory of the deploy tree, such as %q", p, overlaysDir+"/sharded")
	}
	if _, err := fs.Stat(tree, dir+"/kustomization.yaml"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("kustomization %q: no kustomization.yaml there (overlays: %s)", p, strings.Join(Overlays(), ", "))
		}
		return "", fmt.Errorf("kustomization %q: %w", p, err)
	}
	return dir, nil
}

// inMemory copies the tree into a kustomize file system rooted at "/".
func inMemory() (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(tree, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := tree.ReadFile(name)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+name, data)
	})
	if err != nil {
		return nil, fmt.Errorf("copying the deploy tree: %w", err)
	}
	return mem, nil
}
