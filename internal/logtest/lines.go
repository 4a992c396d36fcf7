package logtest

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Lines collects the lines of the funcr loggers it makes, each as funcr formats it ("level"=N with
// the verbosity, "msg"=..., then the key-value pairs). It is safe for concurrent use.
type Lines struct {
	mu    sync.Mutex
	lines []string
}

// Logger returns a logger that writes into l the lines up to verbosity.
func (l *Lines) Logger(verbosity int) logr.Logger {
	return funcr.New(l.add, funcr.Options{Verbosity: verbosity})
}

func (l *Lines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

// With returns the lines that contain every one of parts.
func (l *Lines) With(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}
