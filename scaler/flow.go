package scaler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// Flow is one scale flow of one namespace in one direction, run in steps: each Step does the work that
// is due and says when the next one is, so that a caller can wait (an initial delay, a back-off, the
// ready replicas) without holding a worker.
//
// A Flow is used by one goroutine at a time: Step must not be called concurrently with itself. A flow
// whose Step was cancelled has ended; its caller drops it, and the state on the resources lets the next
// flow finish the work (see the package doc).
type Flow struct {
	s         *Scaler
	namespace string
	dir       Direction
	why       Reason
	log       logr.Logger
	start     time.Time
	plan      [][]config.DependentResourceInfo
	level     int     // the index in plan of the level in progress
	tasks     []*task // the resources of that level; nil before it starts
	ended     bool
	err       error
}

// NewFlow returns the flow of direction dir on the resources in namespace, level by level (see Plan).
// Nothing is read or written before its first Step; the flow's duration is measured from now.
func (s *Scaler) NewFlow(namespace string, dir Direction, why Reason) *Flow {
	return &Flow{s: s, namespace: namespace, dir: dir, why: why, start: s.clock().Now(), plan: Plan(s.Resources, dir)}
}

// Direction returns the direction of the flow.
func (f *Flow) Direction() Direction { return f.dir }

// Step does the work that is due now (on the Scaler's Clock) and returns how long until the next step
// is due. The resources of a level progress in parallel, each in a goroutine that Step starts and waits
// for; when a level completes, the next one starts in the same Step. Step never waits on the clock nor
// for the Scaler's Limiter (a token not free now is reserved, and the step comes back when it is due);
// it waits only for the requests it sends.
//
// done reports that the flow has ended; err is nil when it completed, else why it stopped: a failed
// level (naming its resources), a write the Guard refused (wrapping ErrRefused), a verdict superseded
// (wrapping ErrSuperseded) or the end of ctx. A Step after the end returns the same result.
func (f *Flow) Step(ctx context.Context) (next time.Duration, done bool, err error) {
	if f.ended {
		return 0, true, f.err
	}
	if f.log.GetSink() == nil {
		f.log = f.s.logger(ctx).WithValues("namespace", f.namespace, "direction", f.dir.String())
	}
	if f.dir != Up && f.dir != Down {
		f.ended, f.err = true, fmt.Errorf("unknown scale direction %s", f.dir)
		return 0, true, f.err
	}
	for {
		if f.tasks == nil && f.level == len(f.plan) {
			return f.end(nil)
		}
		if err := ctx.Err(); err != nil {
			return f.end(f.cancelled(err))
		}
		if f.tasks == nil {
			f.tasks = f.newTasks(f.plan[f.level])
		}
		f.advance(ctx)
		if err := ctx.Err(); err != nil {
			return f.end(f.cancelled(err))
		}
		if err := f.refusal(); err != nil {
			return f.end(f.stopped(err))
		}
		if next, pending := f.nextDue(); pending {
			if next > 0 {
				return next, false, nil
			}
			continue
		}
		if err := f.levelErr(); err != nil {
			return f.end(f.stopped(err))
		}
		f.level, f.tasks = f.level+1, nil
	}
}

// newTasks returns the tasks of a level's resources.
func (f *Flow) newTasks(level []config.DependentResourceInfo) []*task {
	tasks := make([]*task, len(level))
	for i, info := range level {
		tasks[i] = &task{job: newJob(f.log, f.namespace, info, f.dir, f.why)}
	}
	return tasks
}

// advance runs, in parallel, the tasks whose work is due, and waits for them.
func (f *Flow) advance(ctx context.Context) {
	now := f.s.clock().Now()
	var wg sync.WaitGroup
	for _, t := range f.tasks {
		if t.phase != phaseDone && !now.Before(t.due) {
			wg.Go(func() { f.s.advance(ctx, t) })
		}
	}
	wg.Wait()
}

// nextDue returns the time until the earliest due task; pending is false when every task is done.
func (f *Flow) nextDue() (next time.Duration, pending bool) {
	var earliest time.Time
	for _, t := range f.tasks {
		if t.phase != phaseDone && (!pending || t.due.Before(earliest)) {
			earliest, pending = t.due, true
		}
	}
	if !pending {
		return 0, false
	}
	return earliest.Sub(f.s.clock().Now()), true
}

// levelErr joins the errors of the level's resources.
func (f *Flow) levelErr() error {
	errs := make([]error, len(f.tasks))
	for i, t := range f.tasks {
		errs[i] = t.err
	}
	return errors.Join(errs...)
}

// refusal returns the error of a resource of the level whose write the Scaler's Guard refused, or
// whose verdict was superseded, if any: the flow ends at once, without waiting for the rest of the
// level, since this replica may not act on the namespace now, or not in this direction.
func (f *Flow) refusal() error {
	for _, t := range f.tasks {
		if errors.Is(t.err, ErrRefused) || errors.Is(t.err, ErrSuperseded) {
			return t.err
		}
	}
	return nil
}

// stopped returns the error of a flow stopped at the level in progress by err.
func (f *Flow) stopped(err error) error {
	return fmt.Errorf("scale-%s flow in namespace %s stopped at level %d: %w", f.dir, f.namespace, f.levelNumber(), err)
}

// levelNumber is the configured level in progress, for messages.
func (f *Flow) levelNumber() int {
	return scaleInfoOf(f.plan[f.level][0], f.dir).Level
}

// cancelled returns the error of a flow whose ctx ended. The resources keep what was written; the next
// flow resumes from there.
func (f *Flow) cancelled(err error) error {
	f.log.Info("Scale flow cancelled", "level", f.levelNumber(), "err", err)
	return fmt.Errorf("scale-%s flow in namespace %s cancelled at level %d: %w", f.dir, f.namespace, f.levelNumber(), err)
}

// Close gives back the budget the flow reserved and has not used. A caller that drops a flow before
// its end (another verdict, a stopped probe) calls it, after the Step in flight, if any, returned.
func (f *Flow) Close() {
	for _, t := range f.tasks {
		f.s.releaseBudget(t)
	}
}

// end ends the flow with err and observes its duration.
func (f *Flow) end(err error) (time.Duration, bool, error) {
	f.Close()
	f.ended, f.err = true, err
	scaleDuration.WithLabelValues(f.dir.String()).Observe(f.s.clock().Since(f.start).Seconds())
	return 0, true, err
}
