package clocktimer

import (
	"time"

	"k8s.io/utils/clock"
)

// slack is how far the clock may move while a timer is made before At makes it again: far above the
// microseconds a real clock moves, far below any deadline dwd waits for.
const slack = time.Millisecond

// At returns a timer on clk that fires at at, or false (and no timer) when at has come. The caller
// stops the timer.
func At(clk clock.Clock, at time.Time) (clock.Timer, bool) {
	for {
		now := clk.Now()
		if !at.After(now) {
			return nil, false
		}
		t := clk.NewTimer(at.Sub(now))
		if clk.Since(now) < slack {
			return t, true
		}
		t.Stop() // the clock moved while the timer was made: it would fire late
	}
}
