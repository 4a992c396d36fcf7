package clocktimer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/clocktimer/clocktimertest"
)

func TestATimerFiresAtItsTimeWhenTheClockMovesWhileItIsMade(t *testing.T) {
	start := time.Now()
	clk := clocktimertest.NewSteppingClock(clocktesting.NewFakeClock(start), 3*time.Second)
	timer, ok := At(clk, start.Add(10*time.Second))
	require.True(t, ok)
	defer timer.Stop()
	clk.Step(7 * time.Second) // at the deadline
	select {
	case <-timer.C():
	default:
		t.Fatal("the timer did not fire at its deadline")
	}
	assert.Equal(t, int32(2), clk.Timers.Load(), "the timer made while the clock moved was made again")
}

func TestATimerFiresAtItsTimeAndNotBefore(t *testing.T) {
	start := time.Now()
	clk := clocktesting.NewFakeClock(start)
	timer, ok := At(clk, start.Add(10*time.Second))
	require.True(t, ok)
	defer timer.Stop()
	clk.Step(10*time.Second - time.Nanosecond)
	select {
	case <-timer.C():
		t.Fatal("the timer fired before its deadline")
	default:
	}
	clk.Step(time.Nanosecond)
	select {
	case <-timer.C():
	default:
		t.Fatal("the timer did not fire at its deadline")
	}
}

func TestNoTimerForATimeThatHasCome(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	_, ok := At(clk, clk.Now())
	assert.False(t, ok)
	_, ok = At(clk, clk.Now().Add(-time.Second))
	assert.False(t, ok)
}
