package weeder

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

func TestPodDeletesAreAudited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Process{Group: "g", Member: "m", Incarnation: "i", Partitions: 7})
	require.NoError(t, err)
	f := newPodWatchFixture()
	f.m.Audit = log
	f.own.refusals = []error{fmt.Errorf("%w: acting on shoot--a", sharding.ErrFenced), nil, nil}
	f.deleteErr = func(name string) error {
		if name == "changed" {
			return apierrors.NewConflict(corev1.Resource("pods"), name, errors.New("the ResourceVersion in the precondition does not match"))
		}
		return nil
	}
	stop := f.start(t)
	w := f.nextWatch(t)
	w.Add(crashLoopingPod("refused", "2"))
	w.Add(crashLoopingPod("changed", "3"))
	w.Add(crashLoopingPod("deleted", "4"))
	f.requireDeleted(t, "changed")
	f.requireDeleted(t, "deleted")
	stop()
	require.NoError(t, log.Close())

	records, err := audit.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, records, 5, "start, and the send and result of the two deletes sent; none for the refused one")
	results := map[string]string{}
	sent := map[uint64]bool{}
	for _, r := range records[1:] {
		assert.Equal(t, audit.KindDelete, r.Kind)
		assert.Equal(t, "shoot--a", r.Namespace)
		assert.Equal(t, f.own.Partition("shoot--a"), r.Partition)
		assert.False(t, r.Sent.After(r.Wall))
		if r.Event == audit.EventSend {
			sent[r.ID] = true
			continue
		}
		assert.True(t, sent[r.ID], "the send of %s is on record before its result", r.Object)
		results[r.Object] = r.Result
	}
	assert.Equal(t, map[string]string{"Pod/changed": audit.ResultConflict, "Pod/deleted": audit.ResultOK}, results)
}
