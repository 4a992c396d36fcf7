package weeder

import (
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// logLines collects the lines of a funcr logger.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

// with returns the lines that contain every one of parts.
func (l *logLines) with(parts ...string) []string {
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

func TestPartitionStartsAreDebugLinesAndReadinessChangesInfo(t *testing.T) {
	f := newManagerFixture(t, 10)
	logs := &logLines{}
	f.m.Log = funcr.New(logs.add, funcr.Options{Verbosity: 1})
	f.own.fenced.Store(true) // not owned yet: the readiness is only tracked
	f.ready(svcKey("a", "etcd-main-client"))
	f.ready(svcKey("b", "etcd-main-client"))
	require.Empty(t, logs.with(`"Opened weeding window"`))

	f.acquire(0, sharding.Crash)
	assert.Len(t, logs.with(`"Acquired partition after a crash or at start`, `"level"=1`), 1)
	assert.Len(t, logs.with(`"Opened weeding window"`, `"level"=1`), 2, "one per ready service of the partition, at debug")

	f.ready(svcKey("c", "kube-apiserver"))
	opened := logs.with(`"Opened weeding window"`, `"namespace"="c"`)
	require.Len(t, opened, 1)
	assert.Contains(t, opened[0], `"level"=0`, "a readiness change seen here is logged at info")
}
