package clocktimertest

import (
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// SteppingClock steps its fake clock by By right before the first timer made while it is armed:
// a test's step that lands between the code's reading of the time and the making of its timer.
type SteppingClock struct {
	*clocktesting.FakeClock
	By time.Duration
	// Timers counts the timers made.
	Timers atomic.Int32
	armed  atomic.Bool
}

// NewSteppingClock returns a SteppingClock over fake, armed.
func NewSteppingClock(fake *clocktesting.FakeClock, step time.Duration) *SteppingClock {
	c := &SteppingClock{FakeClock: fake, By: step}
	c.armed.Store(true)
	return c
}

// Arm makes the next timer step the clock; Disarm keeps timers from stepping it.
func (c *SteppingClock) Arm()    { c.armed.Store(true) }
func (c *SteppingClock) Disarm() { c.armed.Store(false) }

// Armed tells whether no timer has stepped the clock since Arm.
func (c *SteppingClock) Armed() bool { return c.armed.Load() }

// NewTimer steps the clock first when armed, then makes the timer on the fake clock.
func (c *SteppingClock) NewTimer(d time.Duration) clock.Timer {
	c.Timers.Add(1)
	if c.armed.CompareAndSwap(true, false) {
		c.FakeClock.Step(c.By)
	}
	return c.FakeClock.NewTimer(d)
}
