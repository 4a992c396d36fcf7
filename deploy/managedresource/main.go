package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/sharded-dwd/dependency-watchdog/deploy"
)

// options are the command's flags.
type options struct {
	kustomization, name, namespace string
}

func main() {
	o := options{}
	flag.StringVar(&o.kustomization, "k", "deploy/overlays/gardener", "Directory of the kustomization to render.")
	flag.StringVar(&o.name, "name", "dwd", "Name of the ManagedResource (its Secret is managedresource-<name>).")
	flag.StringVar(&o.namespace, "namespace", "garden", "Namespace of the ManagedResource and its Secret: garden, where the seed's health looks.")
	flag.Parse()
	if err := o.run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run renders the kustomization as a ManagedResource onto out, as YAML documents.
func (o options) run(out io.Writer) error {
	objs, err := deploy.BuildDir(o.kustomization)
	if err != nil {
		return err
	}
	rendered, err := deploy.ManagedResource(o.name, o.namespace, objs)
	if err != nil {
		return err
	}
	for _, r := range rendered {
		data, err := yaml.Marshal(r.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}
