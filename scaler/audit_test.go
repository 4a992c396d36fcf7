package scaler_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

func TestScaleWritesAreAudited(t *testing.T) {
	f := newFixture(t, withoutDelays(upstreamInfos(t)))
	for _, name := range []string{kcm, mcm, ca} {
		f.create(t, name, 1, nil)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Process{Group: "g", Member: "m", Incarnation: "i", Partitions: 7})
	require.NoError(t, err)
	f.scaler.Audit, f.scaler.Partition = log, func(string) int { return 5 }
	f.scaler.Guard = (&guardStub{fence: time.Now().Add(time.Minute)}).guard
	before := time.Now()

	require.NoError(t, f.scaler.Scale(context.Background(), f.ns, scaler.Down, meltdown))
	f.scaler.Guard = (&guardStub{fence: time.Now().Add(-time.Millisecond)}).guard
	require.ErrorIs(t, f.scaler.Scale(context.Background(), f.ns, scaler.Up, meltdown), scaler.ErrRefused)
	require.NoError(t, log.Close())

	records, err := audit.ReadFile(path)
	require.NoError(t, err)
	var objects []string
	sends := map[uint64]audit.Record{}
	for _, r := range records[1:] {
		assert.Equal(t, audit.KindScale, r.Kind)
		assert.Equal(t, f.ns, r.Namespace)
		assert.Equal(t, 5, r.Partition)
		if r.Event == audit.EventSend {
			assert.False(t, r.Sent.Before(before) || r.Sent.After(r.Wall), "on record before it is sent")
			sends[r.ID] = r
			continue
		}
		require.Equal(t, audit.EventWrite, r.Event)
		send, ok := sends[r.ID]
		require.True(t, ok, "the send of write %d is on record before its result", r.ID)
		assert.Equal(t, send.Sent, r.Sent)
		assert.Equal(t, audit.ResultOK, r.Result)
		objects = append(objects, r.Object)
	}
	assert.ElementsMatch(t, []string{"Deployment/" + kcm, "Deployment/" + mcm, "Deployment/" + ca}, objects,
		"every write of the scale-down; none of the refused scale-up")
	assert.Len(t, sends, 3)
}
