package prober

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// modOwnership owns every namespace and spreads them over n partitions.
type modOwnership struct {
	partitionOwnership
	n int
}

func (o modOwnership) Partition(ns string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ns))
	return int(h.Sum32() % uint32(o.n))
}

// releaseFixture is a Manager running probes of shoots spread over partitions, some of them paused.
func releaseFixture(partitions, shoots, paused int) *Manager {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	m := &Manager{Ownership: modOwnership{n: partitions}, Clock: clk, Log: logr.Discard(),
		Scheduler: NewScheduler(clk, 1, nil), Flows: NewScheduler(clk, 1, nil), Clients: &ShootClients{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range shoots {
		m.startLocked(fmt.Sprintf("shoot--p--%d", i), ProbeSpec{}, clk.Now().Add(time.Hour))
	}
	for i := range paused {
		m.pauseLocked(fmt.Sprintf("shoot--paused--%d", i), NotProbedHibernated)
	}
	return m
}

// dwd_shoots_not_probed counts the shoots a lifecycle rule keeps from being probed, by reason, from
// the pause to its end: a wake-up, a changed reason, a release of the partition.
func TestNotProbedCountsThePausedShootsByReason(t *testing.T) {
	hibernated, wakingUp := notProbed.WithLabelValues(NotProbedHibernated), notProbed.WithLabelValues(NotProbedWakingUp)
	h0, w0 := testutil.ToFloat64(hibernated), testutil.ToFloat64(wakingUp)
	m := releaseFixture(4, 0, 8)
	assert.Equal(t, h0+8, testutil.ToFloat64(hibernated))
	m.mu.Lock()
	m.pauseLocked("shoot--paused--0", NotProbedWakingUp)
	m.unpauseLocked("shoot--paused--1")
	m.unpauseLocked("shoot--never-paused")
	m.mu.Unlock()
	assert.Equal(t, h0+6, testutil.ToFloat64(hibernated), "one changed its reason, one woke up")
	assert.Equal(t, w0+1, testutil.ToFloat64(wakingUp))
	invalid := unprotected.WithLabelValues(UnprotectedInvalidCluster)
	i0 := testutil.ToFloat64(invalid)
	m.mu.Lock()
	m.pauseLocked("shoot--paused--2", UnprotectedInvalidCluster)
	m.mu.Unlock()
	assert.Equal(t, h0+5, testutil.ToFloat64(hibernated), "a broken Cluster is no lifecycle rule")
	assert.Equal(t, i0+1, testutil.ToFloat64(invalid), "but a shoot without protection")
	for p := range 4 {
		m.Released(p)
	}
	assert.Equal(t, h0, testutil.ToFloat64(hibernated), "a released partition's shoots are not this replica's")
	assert.Equal(t, w0, testutil.ToFloat64(wakingUp))
	assert.Equal(t, i0, testutil.ToFloat64(invalid))
}

func TestReleasedStopsTheProbesOfItsPartitionOnly(t *testing.T) {
	m := releaseFixture(4, 40, 8)
	own := m.Ownership
	inP := func(p int) (probing, paused int) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for ns := range m.probes {
			if own.Partition(ns) == p {
				probing++
			}
		}
		for ns := range m.paused {
			if own.Partition(ns) == p {
				paused++
			}
		}
		return probing, paused
	}
	probing1, paused1 := inP(1)
	m.Released(0)
	probing, paused := inP(0)
	assert.Zero(t, probing, "no probe of partition 0 runs")
	assert.Zero(t, paused, "no pause of partition 0 is kept")
	probing, paused = inP(1)
	assert.Equal(t, probing1, probing, "partition 1 keeps its probes")
	assert.Equal(t, paused1, paused)
	for p := range 4 {
		m.Released(p)
	}
	assert.Empty(t, m.probes)
	assert.Empty(t, m.paused)
	assert.Empty(t, m.byPartition, "the index forgets what it no longer holds")
}

// BenchmarkReleaseEveryPartition is a fence's cost on the prober: the release of every partition of a
// replica holding 20,000 shoots on the default 887 partitions (docs/sharding.md,
// "The margin is accounted for").
func BenchmarkReleaseEveryPartition(b *testing.B) {
	for range b.N {
		b.StopTimer()
		m := releaseFixture(887, 20000, 0)
		b.StartTimer()
		for p := range 887 {
			m.Released(p)
		}
	}
}

// Released decides under the manager's lock and waits outside it (the package doc, Locking): while
// the run of a probe of the released partition is in flight, the manager's lock is free for the
// reconciles and probes of other partitions, and Released returns only once the run has ended.
func TestReleasedWaitsForItsProbesOutsideTheLock(t *testing.T) {
	m := releaseFixture(2, 20, 0)
	var ns string
	for candidate := range m.probes {
		if m.Ownership.Partition(candidate) == 0 {
			ns = candidate
			break
		}
	}
	require.NotEmpty(t, ns, "a probe in partition 0")
	running, unblock := make(chan struct{}), make(chan struct{})
	m.Scheduler.Remove(ns) // scheduled an hour ahead: due now instead, with a run that takes its time to see the cancel
	m.Scheduler.Schedule(ns, m.Clock.Now(), func(context.Context) time.Duration {
		close(running)
		<-unblock
		return Done
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Scheduler.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var end sync.Once
	unblockRun := func() { end.Do(func() { close(unblock) }) }
	t.Cleanup(unblockRun) // first, should the test fail while the run is blocked
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe never ran")
	}

	released := make(chan struct{})
	go func() { defer close(released); m.Released(0) }()
	require.Eventually(t, func() bool { return !m.Probing(ns) }, 10*time.Second, time.Millisecond,
		"the probe is dropped under the lock at once, and the lock is free while its run goes on")
	select {
	case <-released:
		t.Fatal("Released returned while the run of its probe was in flight")
	default:
	}
	unblockRun()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("Released did not return after the run ended")
	}
}
