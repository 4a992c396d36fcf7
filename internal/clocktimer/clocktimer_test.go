package clocktimer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// steppingClock steps its fake clock by step right before it makes the first timer: the clock moves
// between the reading of the time and the making of the timer.
type steppingClock struct {
	*clocktesting.FakeClock
	step  time.Duration
	timer int
}

func (c *steppingClock) NewTimer(d time.Duration) clock.Timer {
	if c.timer++; c.timer == 1 {
		c.FakeClock.Step(c.step)
	}
	return c.FakeClock.NewTimer(d)
}

func TestATimerFiresAtItsTimeWhenTheClockMovesWhileItIsMade(t *testing.T) {
	start := time.Now()
	clk := &steppingClock{FakeClock: clocktesting.NewFakeClock(start), step: 3 * time.Second}
	timer, ok := At(clk, start.Add(10*time.Second))
	require.True(t, ok)
	defer timer.Stop()
	clk.Step(7 * time.Second) // at the deadline
	select {
	case <-timer.C():
	default:
		t.Fatal("the timer did not fire at its deadline")
	}
	assert.Equal(t, 2, clk.timer, "the timer made while the clock moved was made again")
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
