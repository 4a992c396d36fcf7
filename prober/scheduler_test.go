package prober

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/clocktimer/clocktimertest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// startScheduler runs a scheduler on a fake clock until the test ends.
func startScheduler(t *testing.T, workers int, lag func(time.Duration)) (*Scheduler, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(t0)
	s := NewScheduler(clk, workers, lag)
	s.idle = time.Hour // a spare goroutine stays, however slow the machine: its real-clock wait times nothing
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, clk
}

// stepWhenWaiting steps clk by d once the scheduler waits on it for its next due task: a step taken
// before the dispatcher set its timer would be lost.
func stepWhenWaiting(t *testing.T, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "the scheduler waits for its next task")
	clk.Step(d)
}

// counter is a job that counts its runs and asks to run again after every.
func counter(n *atomic.Int32, every time.Duration) Job {
	return func(context.Context) time.Duration { n.Add(1); return every }
}

func TestSchedulerRunsEachTaskAtItsTime(t *testing.T) {
	s, clk := startScheduler(t, 2, nil)
	var a, b atomic.Int32
	s.Schedule("a", t0, counter(&a, 10*time.Second))
	s.Schedule("b", t0.Add(5*time.Second), counter(&b, 10*time.Second))
	require.Eventually(t, func() bool { return a.Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int32(0), b.Load(), "b is not due yet")

	stepWhenWaiting(t, clk, 5*time.Second)
	require.Eventually(t, func() bool { return b.Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int32(1), a.Load())

	stepWhenWaiting(t, clk, 5*time.Second)
	require.Eventually(t, func() bool { return a.Load() == 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 2, s.Len())
}

func TestSchedulerNeverRunsATaskTwiceAtOnce(t *testing.T) {
	s, clk := startScheduler(t, 4, nil)
	var inFlight, overlaps, runs atomic.Int32
	release := make(chan struct{})
	s.Schedule("slow", t0, func(context.Context) time.Duration {
		if inFlight.Add(1) > 1 {
			overlaps.Add(1)
		}
		runs.Add(1)
		<-release
		inFlight.Add(-1)
		return 0 // due again at once
	})
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, time.Millisecond)
	clk.Step(time.Minute) // long past due: still only the one run in flight
	close(release)
	require.Eventually(t, func() bool { return runs.Load() > 3 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, overlaps.Load())
}

func TestSchedulerRemoveCancelsAndWaits(t *testing.T) {
	s, _ := startScheduler(t, 1, nil)
	started, ended := make(chan struct{}), atomic.Bool{}
	s.Schedule("a", t0, func(ctx context.Context) time.Duration {
		close(started)
		<-ctx.Done()
		ended.Store(true)
		return time.Second
	})
	<-started
	s.Remove("a")
	assert.True(t, ended.Load(), "Remove returns only after the run in flight has ended")
	assert.False(t, s.scheduled("a"))
	s.Remove("a") // removing twice is harmless
}

func TestSchedulerBoundsItsWorkers(t *testing.T) {
	s, _ := startScheduler(t, 3, nil)
	var inFlight, peak atomic.Int32
	release := make(chan struct{})
	var mu sync.Mutex
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
		s.Schedule(key, t0, func(context.Context) time.Duration {
			n := inFlight.Add(1)
			mu.Lock()
			if n > peak.Load() {
				peak.Store(n)
			}
			mu.Unlock()
			<-release
			inFlight.Add(-1)
			return time.Hour
		})
	}
	require.Eventually(t, func() bool { return inFlight.Load() == 3 }, 5*time.Second, time.Millisecond)
	close(release)
	assert.Equal(t, int32(3), peak.Load())
}

func TestSchedulerReportsLag(t *testing.T) {
	lags := make(chan time.Duration, 10)
	s, clk := startScheduler(t, 1, func(d time.Duration) { lags <- d })
	block := make(chan struct{})
	var b atomic.Int32
	s.Schedule("a", t0, func(context.Context) time.Duration { <-block; return time.Hour })
	s.Schedule("b", t0, counter(&b, time.Hour))
	assert.Equal(t, time.Duration(0), <-lags, "the first run starts on time")
	clk.Step(3 * time.Second) // b waits for the only worker
	close(block)
	assert.Equal(t, 3*time.Second, <-lags, "the second run started 3s late")
}

func TestSchedulerReplacesTheJobOfAScheduledKey(t *testing.T) {
	s, clk := startScheduler(t, 1, nil)
	var first, second atomic.Int32
	s.Schedule("a", t0.Add(time.Second), counter(&first, time.Hour))
	s.Schedule("a", t0, counter(&second, time.Hour))
	stepWhenWaiting(t, clk, time.Second)
	require.Eventually(t, func() bool { return second.Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, first.Load())
}

func TestSchedulerRemoveDoesNotWaitForATaskNotYetStarted(t *testing.T) {
	s, _ := startScheduler(t, 1, nil)
	block := make(chan struct{})
	defer close(block)
	started := make(chan struct{})
	s.Schedule("busy", t0, func(context.Context) time.Duration { close(started); <-block; return time.Hour })
	<-started
	var ran atomic.Bool
	s.Schedule("due", t0, func(context.Context) time.Duration { ran.Store(true); return time.Hour })
	// "due" waits for the only slot, which is busy: Remove must not wait for that run.
	require.Never(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		task := s.tasks["due"]
		return task != nil && task.running
	}, 100*time.Millisecond, time.Millisecond, "a due task starts only when a slot is free")
	removed := make(chan struct{})
	go func() { s.Remove("due"); close(removed) }()
	select {
	case <-removed:
	case <-time.After(5 * time.Second):
		t.Fatal("Remove waited for an unrelated run")
	}
	assert.False(t, ran.Load())
}

// Without a bound, a task whose run waits (a shoot that answers late) never delays another's run.
func TestSchedulerWithoutABoundRunsEveryDueTask(t *testing.T) {
	s, _ := startScheduler(t, 0, nil)
	block := make(chan struct{})
	defer close(block)
	var started atomic.Int32
	for i := range 50 {
		s.Schedule(fmt.Sprint("slow-", i), t0, func(context.Context) time.Duration { started.Add(1); <-block; return time.Hour })
	}
	var ran atomic.Bool
	s.Schedule("fast", t0, func(context.Context) time.Duration { ran.Store(true); return time.Hour })
	require.Eventually(t, func() bool { return started.Load() == 50 && ran.Load() }, 5*time.Second, time.Millisecond)
}

func TestSchedulerEndsATaskWhoseJobIsDone(t *testing.T) {
	s, clk := startScheduler(t, 1, nil)
	var runs atomic.Int32
	s.Schedule("flow", t0, func(context.Context) time.Duration {
		if runs.Add(1) == 2 {
			return Done
		}
		return time.Second
	})
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, time.Millisecond)
	stepWhenWaiting(t, clk, time.Second)
	require.Eventually(t, func() bool { return !s.scheduled("flow") }, 5*time.Second, time.Millisecond)
	clk.Step(time.Hour)
	s.Remove("flow") // nothing to wait for
	assert.Equal(t, int32(2), runs.Load())

	// The key can be scheduled again.
	s.Schedule("flow", clk.Now(), counter(&runs, time.Hour))
	require.Eventually(t, func() bool { return runs.Load() == 3 }, 5*time.Second, time.Millisecond)
}

// The same, for a task that has run before: the cancel of its last run must not make Remove wait.
func TestSchedulerRemoveDoesNotWaitForATaskDueAgain(t *testing.T) {
	s, clk := startScheduler(t, 1, nil)
	var runs atomic.Int32
	s.Schedule("due", t0, func(context.Context) time.Duration { runs.Add(1); return time.Second })
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, time.Millisecond)
	block := make(chan struct{})
	defer close(block)
	started := make(chan struct{})
	s.Schedule("busy", t0, func(context.Context) time.Duration { close(started); <-block; return time.Hour })
	<-started
	clk.Step(time.Second) // "due" is due again, and waits for the busy slot
	removed := make(chan struct{})
	go func() { s.Remove("due"); close(removed) }()
	select {
	case <-removed:
	case <-time.After(5 * time.Second):
		t.Fatal("Remove waited for an unrelated run")
	}
	assert.Equal(t, int32(1), runs.Load())
}

// goroutineID is the calling goroutine's number, from the first line of its stack.
func goroutineID() string {
	buf := make([]byte, 64)
	return strings.Fields(string(buf[:runtime.Stack(buf, false)]))[1]
}

// parkedInSelect tells whether goroutine id is parked in a select of the scheduler's runner: only then
// would a hand-off reach it. (Its run being over is not enough: the dispatcher may look for a waiting
// goroutine before this one came back to wait.)
func parkedInSelect(id string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.HasPrefix(g, "goroutine "+id+" [select") && strings.Contains(g, "(*Scheduler).runner") {
			return true
		}
	}
	return false
}

// A goroutine that ended a run runs the next due task, with the stack the last one grew, instead of
// a new goroutine growing a new stack.
func TestSchedulerRunsTheNextTaskOnTheGoroutineOfTheLast(t *testing.T) {
	s, clk := startScheduler(t, 0, nil)
	ids := make(chan string, 2)
	job := func(context.Context) time.Duration { ids <- goroutineID(); return Done }
	s.Schedule("a", t0, job)
	first := <-ids
	require.Eventually(t, func() bool { return parkedInSelect(first) }, 5*time.Second, time.Millisecond,
		"a's goroutine waits for the next task")
	s.Schedule("b", t0.Add(time.Second), job)
	stepWhenWaiting(t, clk, time.Second)
	assert.Equal(t, first, <-ids)
}

// With Batch set, tasks due between two multiples of it start together at the later one, never
// before their time.
func TestSchedulerStartsTasksAtMultiplesOfItsBatch(t *testing.T) {
	const batch = 50 * time.Millisecond
	clk := clocktesting.NewFakeClock(t0) // t0 is a multiple of batch
	s := NewScheduler(clk, 0, nil)
	s.Batch = batch
	s.idle = time.Hour
	var mu sync.Mutex
	started := map[string]time.Time{}
	ran := make(chan struct{}, 3)
	for i, key := range []string{"a", "b", "c"} {
		s.Schedule(key, t0.Add(time.Duration(i+1)*10*time.Millisecond), func(context.Context) time.Duration {
			mu.Lock()
			started[key] = clk.Now()
			mu.Unlock()
			ran <- struct{}{}
			return Done
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	for range 5 {
		stepWhenWaiting(t, clk, 10*time.Millisecond)
	}
	for range 3 {
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("a task did not start")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for key, at := range started {
		assert.Equal(t, t0.Add(batch), at, "%s started at the first multiple of the batch after its time", key)
	}
}

func TestBatchedWaitEndsAtAMultipleOfTheBatch(t *testing.T) {
	now := t0.Add(20 * time.Millisecond)
	s := NewScheduler(clocktesting.NewFakeClock(now), 0, nil)
	s.Batch = 50 * time.Millisecond
	for _, c := range []struct{ wait, want time.Duration }{
		{10 * time.Millisecond, 30 * time.Millisecond}, {30 * time.Millisecond, 30 * time.Millisecond},
		{31 * time.Millisecond, 80 * time.Millisecond}, {10 * time.Second, 10*time.Second + 30*time.Millisecond},
	} {
		assert.Equal(t, now.Add(c.want), s.batched(now.Add(c.wait)), "wait %s", c.wait)
	}
	assert.True(t, s.batched(time.Time{}).IsZero(), "nothing scheduled: no change")
	s.Batch = 0
	assert.Equal(t, now.Add(10*time.Millisecond), s.batched(now.Add(10*time.Millisecond)), "no batch: no change")
}

// A task is due at the first multiple of the batch from its time, whenever the dispatcher asks: a
// wake-up for another reason (a new task, a requeue) between its time and that multiple does not run
// it early. It did when only the dispatcher's sleep was batched, and TestSchedulerStartsTasksAtMultiplesOfItsBatch
// then saw a task start at 10 ms on a loaded machine.
func TestATaskIsDueAtTheBatchAfterItsTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0) // t0 is a multiple of the batch
	s := NewScheduler(clk, 0, nil)
	s.Batch = 50 * time.Millisecond
	s.Schedule("a", t0.Add(10*time.Millisecond), counter(new(atomic.Int32), time.Minute))
	clk.Step(10 * time.Millisecond)
	task, at := s.due()
	assert.Nil(t, task, "not due before the batch")
	assert.Equal(t, t0.Add(50*time.Millisecond), at)
	clk.Step(40 * time.Millisecond)
	task, _ = s.due()
	assert.NotNil(t, task, "due at the batch")
}

// The dispatcher learns when the next task is due, and sleeps after: time that passes in between (a
// busy machine, a test stepping the clock) must not make it sleep past that moment. It did when the
// wait was measured before the sleep: TestSchedulerRunsEachTaskAtItsTime then lost a run now and
// then on a loaded machine.
func TestASleepMeasuresItsWaitWhenItBegins(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	s := NewScheduler(clk, 0, nil)
	s.Schedule("a", t0.Add(5*time.Second), counter(new(atomic.Int32), time.Minute))
	task, at := s.due()
	require.Nil(t, task)
	require.Equal(t, t0.Add(5*time.Second), at)

	clk.Step(5 * time.Second) // the moment passes before the dispatcher sleeps
	slept := make(chan bool, 1)
	go func() { slept <- s.sleep(context.Background(), at) }()
	select {
	case ok := <-slept:
		assert.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("the sleep waits past the moment it was for")
	}
}

// A step of the clock while the dispatcher makes its timer must not make it sleep past the moment it
// sleeps for: the timer, made for the wait measured before the step, would fire that much later
// (TestWindowCapHoldsAcrossNamespaces of the weeder lost a window now and then to this).
func TestASleepEndsAtItsMomentWhenTheClockMovesWhileItsTimerIsMade(t *testing.T) {
	clk := clocktimertest.NewSteppingClock(clocktesting.NewFakeClock(t0), 2*time.Second)
	s := NewScheduler(clk, 0, nil)
	slept := make(chan bool, 1)
	go func() { slept <- s.sleep(context.Background(), t0.Add(5*time.Second)) }()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
	clk.Step(3 * time.Second) // the moment
	select {
	case ok := <-slept:
		assert.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("the sleep waits past the moment it was for")
	}
}

// RunAhead brings the tasks of the keys given that are due within the window after from forward to
// before from, spread in their order over the time left; the others keep their times, and so do
// tasks that have not run yet. With no time left, nothing moves.
func TestSchedulerRunAheadBringsForwardTheTasksDueRightAfter(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	s := NewScheduler(clk, 0, nil)
	never := func(context.Context) time.Duration { return Done }
	due := map[string]time.Duration{"before": 4 * time.Second, "at-from": 5 * time.Second, "a": 6 * time.Second,
		"b": 7500 * time.Millisecond, "window-end": 8 * time.Second, "other": 6 * time.Second, "not-run": 6 * time.Second}
	for key, at := range due {
		s.Schedule(key, t0.Add(at), never)
		s.tasks[key].ran = key != "not-run"
	}
	from, window := t0.Add(5*time.Second), 3*time.Second
	keys := map[string]bool{"before": true, "at-from": true, "a": true, "b": true, "window-end": true, "not-run": true}
	assert.Equal(t, 3, s.RunAhead(from, window, keys))
	next := func(key string) time.Duration {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.tasks[key].next.Sub(t0)
	}
	assert.Equal(t, 4*time.Second, next("before"))
	assert.Equal(t, time.Duration(0), next("at-from"))
	assert.InDelta(t, float64(5*time.Second/3), float64(next("a")), float64(time.Millisecond))
	assert.InDelta(t, float64(12500*time.Millisecond/3), float64(next("b")), float64(time.Millisecond))
	assert.Equal(t, 8*time.Second, next("window-end"))
	assert.Equal(t, 6*time.Second, next("other"), "a task of another key")
	assert.Equal(t, 6*time.Second, next("not-run"), "a task that has not run yet")
	for i := 1; i < len(s.queue); i++ { // still a heap
		assert.False(t, s.queue[i].next.Before(s.queue[(i-1)/2].next), "heap order at %d", i)
	}

	clk.SetTime(from)
	assert.Zero(t, s.RunAhead(from, window, keys), "no time left")
	assert.Equal(t, 8*time.Second, next("window-end"))
}

// A task brought forward runs at its new time: the dispatcher, asleep until the next task's old time,
// wakes to it.
func TestSchedulerRunsATaskBroughtForwardAtItsNewTime(t *testing.T) {
	s, clk := startScheduler(t, 0, nil)
	var runs atomic.Int32
	s.Schedule("a", t0, counter(&runs, 10*time.Second))
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.tasks["a"].index >= 0
	}, 5*time.Second, time.Millisecond, "a is back in the queue")
	// Due at +10 s; brought forward to +2.5 s (from +5 s, a 10 s window: half of the 5 s left).
	require.Equal(t, 1, s.RunAhead(t0.Add(5*time.Second), 10*time.Second, map[string]bool{"a": true}))
	stepWhenWaiting(t, clk, 2500*time.Millisecond)
	require.Eventually(t, func() bool { return runs.Load() == 2 }, 5*time.Second, time.Millisecond, "ran at its new time")
}
