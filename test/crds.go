package test

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed crds/*.yaml crds/deploy/*.yaml
var crdFiles embed.FS

// CRDs returns the CustomResourceDefinitions the tests and the simulator install.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crdsMatching("crds/*.yaml")
}

// DeployCRDs returns the CustomResourceDefinitions of the custom resources deploy/ ships beside dwd
// (VerticalPodAutoscaler, fluent-bit's ClusterFilter and ClusterParser, Gardener's ManagedResource,
// prometheus-operator's PodMonitor and PrometheusRule), for the tests that apply them. Nothing else
// installs them: dwd reads none of them.
func DeployCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crdsMatching("crds/deploy/*.yaml")
}

// crdsMatching decodes the embedded CRD files whose names match pattern, strictly.
func crdsMatching(pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(crdFiles, pattern)
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		data, err := crdFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
