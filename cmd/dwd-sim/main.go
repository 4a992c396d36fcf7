package main

import (
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	ctx := ctrl.SetupSignalHandler()
	root := &cobra.Command{
		Use:           "dwd-sim",
		Short:         "A local seed with simulated shoots, for the demo and the benchmarks",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.AddCommand(newUpCommand(), newDemoCommand(), newBenchCommand(), newAuditCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// quietLogs keeps controller-runtime's own logs out of the terminal.
func quietLogs() {
	ctrl.SetLogger(logr.Discard())
}
