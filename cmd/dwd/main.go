// Command dwd is the sharded dependency watchdog: `dwd run` runs one replica of a group that shares the
// shoot namespaces of a seed, and `dwd prober` and `dwd weeder` take the original's command lines.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	ctx := ctrl.SetupSignalHandler()
	os.Exit(execute(ctx, newRootCommand(), os.Args[1:]))
}
