package sharding

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// auditTrail is an Audit that keeps the events in order, beside what the handler saw.
type auditTrail struct {
	mu     sync.Mutex
	events []string
}

func (a *auditTrail) add(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, s)
}

func (a *auditTrail) Renewed(fence time.Time) { a.add("renew") }
func (a *auditTrail) Acquired(partition int, cause string) {
	a.add(fmt.Sprintf("acquire %d %s", partition, cause))
}
func (a *auditTrail) Released(partition int, cause string) {
	a.add(fmt.Sprintf("release %d %s", partition, cause))
}

// trailHandler writes the work's start and stop into the same trail.
type trailHandler struct{ trail *auditTrail }

func (h trailHandler) Acquired(_ context.Context, p int, _ Takeover) {
	h.trail.add(fmt.Sprintf("start %d", p))
}
func (h trailHandler) Released(p int) { h.trail.add(fmt.Sprintf("stop %d", p)) }

func TestCoordinatorAuditsAcquireBeforeWorkAndReleaseAfter(t *testing.T) {
	for _, tt := range []struct {
		name  string
		stop  func(c *Coordinator)
		cause string
	}{
		{"fence", func(c *Coordinator) { c.Fence() }, ReleaseFence},
		{"leave", func(c *Coordinator) { _, _ = c.Leave(context.Background(), false) }, ReleaseLeave},
		{"returning", func(c *Coordinator) { _, _ = c.Leave(context.Background(), true) }, ReleaseReturning},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := leasestest.NewStore()
			trail := &auditTrail{}
			c := NewCoordinator(Config{Group: "g", Member: "m", Incarnation: "i",
				Ring: RingConfig{PartitionCount: 1, ReplicationFactor: 10, LoadBound: 1.25}, LeaseDuration: 15 * time.Second,
				RetryPeriod: 2 * time.Second, WriteConcurrency: 1, Audit: trail,
				Store: store, Lister: store, Liveness: &switchLiveness{}, Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard(), Handlers: []PartitionHandler{trailHandler{trail}}})
			_, err := c.Reconcile(context.Background())
			require.NoError(t, err)
			tt.stop(c)
			assert.Equal(t, []string{"acquire 0 fresh", "start 0", "stop 0", "release 0 " + tt.cause}, trail.events)
		})
	}
}

func TestAcquireCause(t *testing.T) {
	assert.Equal(t, "fresh", AcquireCause(Fresh))
	assert.Equal(t, "handover", AcquireCause(Handover))
	assert.Equal(t, "expired-holder", AcquireCause(Crash))
	assert.Equal(t, "resume", AcquireCause(Resume))
}

// fenceTrail is an Audit that keeps the fences of the renewals.
type fenceTrail struct {
	auditTrail
	fences []time.Time
}

func (a *fenceTrail) Renewed(fence time.Time) {
	a.fences = append(a.fences, fence)
	a.add("renew")
}

func TestLeaderAuditsRenewalsAndItsLead(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	inner := &fakeLock{}
	trail := &fenceTrail{}
	leader := NewLeader(LeaderOptions{Group: "dwd-prober", Member: "me", Lock: inner, RenewDeadline: 10 * time.Second,
		LeaseDuration: 15 * time.Second, Audit: trail, Clock: clk, Handlers: []PartitionHandler{trailHandler{&trail.auditTrail}}})
	lock := leader.Lock()
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}

	require.NoError(t, lock.Create(context.Background(), mine))
	inner.failing = true
	require.Error(t, lock.Update(context.Background(), mine))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- leader.Start(ctx) }()
	require.Eventually(t, func() bool { return leader.Owns("shoot--a") }, 5*time.Second, 10*time.Millisecond)
	stop()
	require.NoError(t, <-done)

	assert.Equal(t, []time.Time{time.Unix(1010, 0)}, trail.fences, "a successful renewal, with its fence; no failed one")
	assert.Equal(t, []string{"renew", "acquire 0 leading", "start 0", "stop 0", "release 0 stop"}, trail.events)
}
