package weeder

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

func TestPartitionStartsAreDebugLinesAndReadinessChangesInfo(t *testing.T) {
	f := newManagerFixture(t, 10)
	logs := &logtest.Lines{}
	f.m.Log = logs.Logger(1)
	f.own.fenced.Store(true) // not owned yet: the readiness is only tracked
	f.ready(svcKey("a", "etcd-main-client"))
	f.ready(svcKey("b", "etcd-main-client"))
	require.Empty(t, logs.With(`"Opened weeding window"`))

	f.acquire(0, sharding.Crash)
	assert.Len(t, logs.With(`"Acquired partition after a crash or at start`, `"level"=1`), 1)
	assert.Len(t, logs.With(`"Opened weeding window"`, `"level"=1`), 2, "one per ready service of the partition, at debug")

	f.ready(svcKey("c", "kube-apiserver"))
	opened := logs.With(`"Opened weeding window"`, `"namespace"="c"`)
	require.Len(t, opened, 1)
	assert.Contains(t, opened[0], `"level"=0`, "a readiness change seen here is logged at info")
}
