package main

import (
	"fmt"
	"io"
	"os"
	"sync"

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

// progressPrinter reports the progress of creating things: on one line on a terminal, else a line
// per tenth.
func progressPrinter(w io.Writer, what string) func(done, total int) {
	var mu sync.Mutex
	terminal := isTerminal(w)
	return func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case terminal && (done%25 == 0 || done == total):
			fmt.Fprintf(w, "\rcreating %s: %d/%d", what, done, total)
		case !terminal && (done%max(total/10, 1) == 0 || done == total):
			fmt.Fprintf(w, "creating %s: %d/%d\n", what, done, total)
		}
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	if l, ok := w.(*lockedWriter); ok {
		w = l.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
