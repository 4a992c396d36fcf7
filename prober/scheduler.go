package prober

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sharded-dwd/dependency-watchdog/internal/clocktimer"
)

// Job is one run of a scheduled task, for example one probe cycle of a shoot. It returns how long to
// wait before the next run, or Done when the task has ended. ctx ends when the task is removed or the
// scheduler stops.
type Job func(ctx context.Context) time.Duration

// Done, returned by a Job, ends its task: it is unscheduled as if removed.
const Done time.Duration = -1

// Scheduler runs tasks at their next-run times: a min-heap of next-run times hands each due task to a
// run of its own, at most workers runs at once (when workers > 0), and a task is never run twice at
// once, so there are never more runs than tasks. A run that waits on I/O (a slow shoot) holds its
// slot only: with no bound, a slow task never delays another's run.
//
// A run's goroutine that has ended its run waits up to runnerIdle for the next due task before it
// ends: a probe grows its goroutine's stack (client-go and HTTP/2 calls run deep), and a goroutine
// per run would grow a new stack every time, a tenth of a prober's CPU.
//
// With Batch set, a dispatcher that waits for the next due task wakes at the next multiple of Batch
// on the clock, and starts every task due by then: the runs of many tasks start together. A wake-up
// of the Go runtime from idle costs more than a probe's own work; probes spread evenly over an
// interval (100 a second at 1,000 shoots) woke it for each one.
//
// Locking: mu guards the heap and the task map; a task's run happens outside it.
type Scheduler struct {
	// Batch, when positive, is the step of the clock at which a waiting dispatcher wakes (see above).
	// A task is started at most Batch late by it. Set it before Start.
	Batch time.Duration

	clock   clock.WithTicker
	workers int
	// lag, when set, observes how late each run started against its scheduled time.
	lag func(time.Duration)
	// handoff hands a due task to a goroutine waiting for one after its run.
	handoff chan *task
	// idle is how long such a goroutine waits (runnerIdle; tests set more).
	idle time.Duration

	mu    sync.Mutex
	queue taskHeap
	tasks map[string]*task
	wake  chan struct{}
}

// task is one scheduled key.
type task struct {
	key     string
	job     Job
	next    time.Time
	index   int  // position in the heap, -1 while running or removed
	running bool // a run is in flight
	ran     bool // a run has begun
	removed bool
	cancel  context.CancelFunc // cancels the run in flight
	done    chan struct{}      // closed when the run in flight ends
}

// NewScheduler returns a scheduler that runs at most workers tasks at once, or as many as are due
// when workers <= 0 (each task at most once); lag, if not nil, is told how late every run started.
func NewScheduler(clk clock.WithTicker, workers int, lag func(time.Duration)) *Scheduler {
	return &Scheduler{clock: clk, workers: max(workers, 0), lag: lag, tasks: map[string]*task{}, wake: make(chan struct{}, 1),
		handoff: make(chan *task), idle: runnerIdle}
}

// runnerIdle is how long a goroutine that ended a run waits for another due task before it ends. It
// is measured on the real clock: it times no task, only how long a spare goroutine is kept.
const runnerIdle = 2 * time.Second

// Schedule runs job for key first at at, then as the job says. A key already scheduled keeps its
// place in time but runs the new job from its next run on.
func (s *Scheduler) Schedule(key string, at time.Time, job Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tasks[key]; ok {
		t.job = job
		return
	}
	t := &task{key: key, job: job, next: at}
	s.tasks[key] = t
	heap.Push(&s.queue, t)
	s.signal()
}

// RunAhead brings forward the tasks of keys due in [from, from+window), so that they run before
// from: the one due at from+x runs at now + x·(from−now)/window, spread in their order over the time
// left. With no time left it moves nothing: a burst of runs right at from would meet what from
// stands for (a stop that cuts them). A task that has not run yet keeps its time (a probe's first run
// may wait out an initial delay), and a run in flight the time it asks for. It returns how many it
// moved.
func (s *Scheduler) RunAhead(from time.Time, window time.Duration, keys map[string]bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	left := from.Sub(now)
	if window <= 0 || left <= 0 {
		return 0
	}
	moved := 0
	for _, t := range s.queue {
		if x := t.next.Sub(from); t.ran && x >= 0 && x < window && keys[t.key] {
			t.next = now.Add(time.Duration(float64(x) / float64(window) * float64(left)))
			moved++
		}
	}
	if moved > 0 {
		heap.Init(&s.queue)
		s.signal()
	}
	return moved
}

// scheduled reports whether key is scheduled.
func (s *Scheduler) scheduled(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tasks[key]
	return ok
}

// Len returns the number of scheduled tasks.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tasks)
}

// Remove unschedules key; a run in flight is cancelled, and Remove returns when it has ended.
func (s *Scheduler) Remove(key string) {
	s.mu.Lock()
	t, ok := s.tasks[key]
	if !ok {
		s.mu.Unlock()
		return
	}
	delete(s.tasks, key)
	t.removed = true
	if t.index >= 0 {
		heap.Remove(&s.queue, t.index)
	}
	// A task handed to a worker that has not begun its run yet (no cancel yet) will see removed and
	// skip its job: nothing to wait for.
	wait, done := t.running && t.cancel != nil, t.done
	if wait {
		t.cancel()
	}
	s.mu.Unlock()
	if wait {
		<-done
	}
}

// Start runs the due tasks until ctx ends, then waits for the runs in flight. It is a
// manager.Runnable.
func (s *Scheduler) Start(ctx context.Context) error {
	var slots chan struct{} // nil: no bound
	if s.workers > 0 {
		slots = make(chan struct{}, s.workers)
	}
	var wg sync.WaitGroup
	s.dispatch(ctx, slots, &wg)
	wg.Wait()
	return nil
}

// dispatch starts a run of each due task, in order of their next-run times, once a slot is free,
// until ctx ends.
func (s *Scheduler) dispatch(ctx context.Context, slots chan struct{}, wg *sync.WaitGroup) {
	for {
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		t, at := s.due()
		if t != nil {
			select {
			case s.handoff <- t: // to a goroutine waiting after its run
			default:
				wg.Go(func() { s.runner(ctx, t, slots) })
			}
			continue
		}
		if slots != nil {
			<-slots
		}
		if !s.sleep(ctx, at) {
			return
		}
	}
}

// runner runs t, then each due task handed to it, until none comes for runnerIdle or ctx ends.
func (s *Scheduler) runner(ctx context.Context, t *task, slots chan struct{}) {
	idle := time.NewTimer(s.idle)
	defer idle.Stop()
	for {
		s.run(ctx, t)
		if slots != nil {
			<-slots
		}
		idle.Reset(s.idle)
		select {
		case t = <-s.handoff:
		case <-idle.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// batched moves at, when the next task is due, to the next multiple of Batch.
func (s *Scheduler) batched(at time.Time) time.Time {
	if s.Batch <= 0 || at.IsZero() {
		return at
	}
	if past := at.Sub(at.Truncate(s.Batch)); past > 0 {
		at = at.Add(s.Batch - past)
	}
	return at
}

// sleep waits until at (for ever when it is zero), a wake-up or the end of ctx; false when ctx
// ended. The timer fires at at, whatever time passed since at was chosen (a busy machine, a clock
// stepped by a test, also while the timer is made).
func (s *Scheduler) sleep(ctx context.Context, at time.Time) bool {
	var timer <-chan time.Time
	if !at.IsZero() {
		tm, armed := clocktimer.At(s.clock, at)
		if !armed {
			return ctx.Err() == nil
		}
		defer tm.Stop()
		timer = tm.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.wake:
	case <-timer:
	}
	return true
}

// due pops the first task if its time has come, else returns when it will (the zero time: nothing
// scheduled). With a Batch, a task's time comes at the first multiple of Batch from its next-run time,
// however the dispatcher was woken.
func (s *Scheduler) due() (*task, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil, time.Time{}
	}
	first := s.queue[0]
	if at := s.batched(first.next); at.After(s.clock.Now()) {
		return nil, at
	}
	heap.Pop(&s.queue)
	first.running, first.done = true, make(chan struct{})
	return first, time.Time{}
}

// run runs one task's job and schedules its next run.
func (s *Scheduler) run(ctx context.Context, t *task) {
	s.mu.Lock()
	runCtx, cancel := context.WithCancel(ctx)
	t.cancel, t.ran = cancel, true
	job, scheduled := t.job, t.next
	removed := t.removed
	s.mu.Unlock()
	if s.lag != nil {
		s.lag(s.clock.Since(scheduled))
	}
	var next time.Duration
	if !removed {
		next = job(runCtx)
	}
	cancel()
	if next == Done {
		s.end(t)
		return
	}
	s.requeue(t, s.clock.Now().Add(next))
}

// end ends a run whose job said Done: the task is unscheduled, unless a new task took its key.
func (s *Scheduler) end(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.running, t.cancel = false, nil
	close(t.done)
	if !t.removed && s.tasks[t.key] == t {
		delete(s.tasks, t.key)
	}
	t.removed = true
}

// requeue ends a run: the task goes back into the heap at next unless it was removed meanwhile.
func (s *Scheduler) requeue(t *task, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.running {
		t.running, t.cancel = false, nil
		close(t.done)
	}
	if t.removed {
		return
	}
	t.next = next
	heap.Push(&s.queue, t)
	s.signal()
}

// signal wakes the dispatcher; mu must be held.
func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// taskHeap orders tasks by next-run time.
type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
