// Command dwd is the sharded dependency watchdog: `dwd run` runs one replica of a group that shares the
// shoot namespaces of a seed, and `dwd prober` and `dwd weeder` take the original's command lines.
package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	ctx := ctrl.SetupSignalHandler()
	os.Exit(execute(ctx, rootCommandAs(os.Args[0]), os.Args[1:]))
}

// kubectlPlugin is the name under which kubectl finds the binary as its plugin `kubectl dwd`.
const kubectlPlugin = "kubectl-dwd"

// rootCommandAs is the command tree of the binary invoked as argv0: named `kubectl dwd` in its help
// when it runs as kubectl's plugin (kubectl passes the arguments after `dwd` as they are).
func rootCommandAs(argv0 string) *cobra.Command {
	root := newRootCommand()
	if name := filepath.Base(argv0); name == kubectlPlugin || name == kubectlPlugin+".exe" {
		root.Use = kubectlPlugin
		if root.Annotations == nil {
			root.Annotations = map[string]string{}
		}
		root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl dwd"
	}
	return root
}
