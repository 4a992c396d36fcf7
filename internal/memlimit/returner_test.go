package memlimit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/memlimit"
)

func TestTheMemoryIsReturnedOnceTheCachesStoppedShrinking(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	var freed atomic.Int32
	r := &memlimit.Returner{Clock: clk, Free: func() { freed.Add(1) }}
	waiting := func() bool { return clk.HasWaiters() }

	r.Shrunk()
	require.Eventually(t, waiting, 5*time.Second, time.Millisecond)
	clk.Step(memlimit.ReturnAfter / 2)
	r.Shrunk() // a further shrink of the same rebalance
	require.Eventually(t, waiting, 5*time.Second, time.Millisecond)
	clk.Step(memlimit.ReturnAfter / 2)
	require.Eventually(t, waiting, 5*time.Second, time.Millisecond, "waits on after the first shrink's window")
	assert.Zero(t, freed.Load(), "not before ReturnAfter since the last shrink")

	clk.Step(memlimit.ReturnAfter / 2)
	require.Eventually(t, func() bool { return freed.Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.False(t, clk.HasWaiters(), "nothing waits once it returned")

	r.Shrunk()
	require.Eventually(t, waiting, 5*time.Second, time.Millisecond)
	clk.Step(memlimit.ReturnAfter)
	require.Eventually(t, func() bool { return freed.Load() == 2 }, 5*time.Second, time.Millisecond, "a later shrink returns again")
}
