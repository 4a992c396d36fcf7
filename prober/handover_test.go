package prober

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// partitionOwnership puts each namespace in one of 4 partitions and owns them all.
type partitionOwnership struct{}

func (partitionOwnership) Owns(string) bool { return true }

func (partitionOwnership) Partition(ns string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ns))
	return int(h.Sum32() % 4)
}

func (partitionOwnership) Guard(ctx context.Context, _ string) (context.Context, context.CancelFunc, error) {
	return ctx, func() {}, nil
}

func TestReleasedShootsAreProbedLongestUnprobedFirstByTheNextHolder(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	own := partitionOwnership{}
	var shoots []string
	for _, ns := range []string{"shoot--a--1", "shoot--a--2", "shoot--a--3", "shoot--a--4", "shoot--a--5", "shoot--a--6", "shoot--a--7"} {
		if own.Partition(ns) == own.Partition("shoot--a--1") {
			shoots = append(shoots, ns)
		}
	}
	require.GreaterOrEqual(t, len(shoots), 2, "the test needs two shoots in one partition")
	p := own.Partition(shoots[0])

	// The releasing replica: shoot i was last probed i+1 seconds before the release.
	old := &Manager{Ownership: own, Clock: clk, Log: testr.New(t)}
	old.mu.Lock()
	for i, ns := range shoots {
		old.keepAgeLocked(p, ns, &shootProbe{st: &probeState{lastRun: now.Add(-time.Duration(i+1) * time.Second)}})
	}
	old.mu.Unlock()
	key, state := old.HandoverState(p)
	require.Equal(t, HandoverKey, key)
	var ages map[string]int64
	require.NoError(t, json.Unmarshal([]byte(state), &ages))
	assert.Len(t, ages, len(shoots))
	_, again := old.HandoverState(p)
	assert.Empty(t, again, "handed over once")

	// The next holder, its clock an hour off: only the ages count.
	next := &Manager{Ownership: own, Clock: clocktesting.NewFakeClock(now.Add(time.Hour)), Log: testr.New(t)}
	next.takeOverdue(p, state)
	first := map[string]time.Time{}
	for _, ns := range shoots {
		due, ok := next.overdue[ns]
		require.True(t, ok, ns)
		first[ns] = overdueRun(next.Clock.Now(), due)
	}
	order := slices.SortedFunc(slices.Values(shoots), func(a, b string) int { return first[a].Compare(first[b]) })
	want := slices.Clone(shoots)
	slices.Reverse(want)
	assert.Equal(t, want, order, "the longest unprobed runs first")
	for _, ns := range shoots {
		assert.WithinDuration(t, next.Clock.Now(), first[ns], 20*time.Millisecond, "at once, not counted as probe lag")
	}
	next.dropOverdue(p)
	assert.Empty(t, next.overdue)
}

func TestResumeAfterAFenceUsesTheAgesKeptHere(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m := &Manager{Ownership: partitionOwnership{}, Clock: clocktesting.NewFakeClock(now), Log: testr.New(t)}
	p := m.Ownership.Partition("shoot--a--1")
	m.mu.Lock()
	m.keepAgeLocked(p, "shoot--a--1", &shootProbe{st: &probeState{lastRun: now.Add(-7 * time.Second)}})
	m.mu.Unlock()
	m.takeOverdue(p, "")
	assert.Equal(t, 7*time.Second, m.overdue["shoot--a--1"])
	assert.Empty(t, m.released, "kept ages are used once")
	m.takeOverdue(p, "not json")
	assert.Equal(t, 7*time.Second, m.overdue["shoot--a--1"], "unreadable state is ignored")
}
