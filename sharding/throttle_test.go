package sharding

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

// recordingQueue records when adds take effect, on a fake clock.
type recordingQueue struct {
	workqueue.TypedDelayingInterface[string]
	clock *clocktesting.FakeClock
	adds  []time.Duration // after the start
	start time.Time
}

func (q *recordingQueue) Add(string) { q.adds = append(q.adds, q.clock.Now().Sub(q.start)) }

func (q *recordingQueue) AddAfter(_ string, d time.Duration) {
	q.adds = append(q.adds, q.clock.Now().Add(d).Sub(q.start))
}

// Lease events start a reconcile at once, and a burst of them one more per interval at most.
func TestThrottleStartsOneReconcilePerIntervalForABurst(t *testing.T) {
	clk := clocktesting.NewFakeClock(safetyT0)
	q := &recordingQueue{clock: clk, start: clk.Now()}
	th := &throttle{clock: clk, interval: 200 * time.Millisecond}
	// 15 events a second for a second (a group of 30 renewing every 2 s), then quiet, then one.
	for range 15 {
		th.add(q, "g")
		clk.Step(time.Second / 15)
	}
	clk.Step(time.Second)
	th.add(q, "g")
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	assert.Equal(t, ms(0, 200, 400, 600, 800, 1000, 2000), roundedToMilliseconds(q.adds),
		"the first at once, then one per 200 ms while the events go on, and at once again after a quiet second")
}

func roundedToMilliseconds(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
