package sim

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// ProgressPrinter reports the progress of creating things (CreateShoots' progress): on one line on a
// terminal, else a line per tenth.
func ProgressPrinter(w io.Writer, what string) func(done, total int) {
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
	if l, ok := w.(*LockedWriter); ok {
		w = l.W
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// LockedWriter lets several goroutines (a script and a live view) write to one output.
type LockedWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.W.Write(p)
}
