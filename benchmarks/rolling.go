package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/config"
)

// The rolling scenario's waits: for a replica's exit after SIGTERM (then it is killed, as a kubelet
// does after the grace period), and for a new process to be ready.
const (
	rollingStopTimeout  = 30 * time.Second
	rollingReadyTimeout = 3 * time.Minute
)

// rolling restarts every replica in turn as a StatefulSet's rolling update does, from the highest
// ordinal down, and measures what the shoots saw of it.
func (b *bench) rolling(ctx context.Context, shoots, replicas int) (*Rolling, error) {
	rs, err := b.replicaSet(benchProfile)
	if err != nil {
		return nil, err
	}
	limit := gapLimit(b.opts.Interval)
	x := &Rolling{Shoots: shoots, Replicas: replicas, GapLimitSeconds: limit.Seconds(),
		ResumeTimeoutSeconds: restartResumeTimeout(b.opts.Interval).Seconds(), SettleSeconds: (benchReturnGrace + b.opts.Interval).Seconds()}
	// The bench runs no StatefulSet for leave mode auto to ask: the replicas are told they return.
	if b.dwdHas[flagLeaveMode] {
		rs.Args = append(slices.Clip(rs.Args), flagLeaveMode+"="+config.LeaveReturn)
		x.LeaveMode = config.LeaveReturn
	}
	tracker, stop, err := b.startTracked(ctx, shoots, replicas, rs)
	if err != nil {
		return nil, err
	}
	defer stop()
	fmt.Fprintf(b.out, "rolling, %d shoots × %d replicas, leave mode %q\n", shoots, replicas, x.LeaveMode)
	owners := ownersOf(b.seed.Shoots.Callers())
	b.seed.Shoots.MarkProbes()
	tracker.mark()
	start := time.Now()
	started, err := b.rollOut(ctx, x)
	if err != nil {
		return x, err
	}
	x.RolloutSeconds = time.Since(start).Seconds()
	x.NotResumed, err = b.awaitResumed(ctx, owners, started, seconds(x.ResumeTimeoutSeconds))
	if err != nil {
		return x, err
	}
	x.ResumedSeconds = time.Since(start).Seconds()
	// A share kept for a member that returned late, or a ring that changes after all, shows within a
	// return grace: the window stays open that long and a probe interval more.
	if err := pause(ctx, seconds(x.SettleSeconds)); err != nil {
		return x, err
	}
	b.measureRollout(x, owners, limit)
	x.PartitionLeaseWrites = tracker.writes()
	fmt.Fprintf(b.out, "  %d shoots handed over; longest probe gap %.2fs (p99 %.2fs), %d shoots over %s; resumed after %.1fs, %d not; partition lease writes %s\n",
		x.HandedOver, x.LongestGapSeconds, x.GapP99Seconds, x.GapsOverLimit, limit, x.ResumedSeconds, x.NotResumed, x.PartitionLeaseWrites)
	return x, nil
}

// rollOut restarts the replicas from the highest ordinal down, each once the one before is ready, and
// returns when each new process started.
func (b *bench) rollOut(ctx context.Context, x *Rolling) (map[string]time.Time, error) {
	started := map[string]time.Time{}
	for i := len(b.replicas) - 1; i >= 0; i-- {
		r := b.replicas[i]
		rr, at, err := b.restart(ctx, r)
		x.Restarts = append(x.Restarts, rr)
		if err != nil {
			return started, err
		}
		started[r.Name] = at
		fmt.Fprintf(b.out, "  %s: exited %.2fs after SIGTERM, ready %.2fs after its start\n", r.Name, rr.StopSeconds, rr.ReadySeconds)
	}
	return started, nil
}

// restart stops a replica gracefully, starts a new process under its name at once and waits until
// it is ready; it returns when the new process started.
func (b *bench) restart(ctx context.Context, r *sim.Replica) (RollingRestart, time.Time, error) {
	rr := RollingRestart{Replica: r.Name}
	stop := time.Now()
	rr.Killed = !r.Terminate(rollingStopTimeout)
	rr.StopSeconds = time.Since(stop).Seconds()
	started := time.Now()
	if err := r.Restart(); err != nil {
		return rr, started, err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, rollingReadyTimeout, true, func(ctx context.Context) (bool, error) {
		return r.Ready(ctx), exited([]*sim.Replica{r})
	})
	if err != nil {
		return rr, started, fmt.Errorf("%s not ready %s after its start: %w", r.Name, rollingReadyTimeout, err)
	}
	rr.ReadySeconds = time.Since(started).Seconds()
	return rr, started, nil
}

// awaitResumed waits until every shoot was probed by its owner's new process, or the timeout passes
// (no error: it returns how many were not), polling once a second.
func (b *bench) awaitResumed(ctx context.Context, owners map[string]string, started map[string]time.Time, timeout time.Duration) (int, error) {
	left := len(owners)
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		left = notResumed(b.seed.Shoots.ProbeStats(), owners, started)
		return left == 0, exited(b.replicas)
	})
	if err != nil && ctx.Err() == nil {
		return left, nil
	}
	return left, err
}

// measureRollout fills in what the shoots' probe windows say.
func (b *bench) measureRollout(x *Rolling, owners map[string]string, limit time.Duration) {
	stats := b.seed.Shoots.ProbeStats()
	gaps := summarizeGaps(stats, owners, time.Now(), limit)
	x.HandedOver = probedByOthers(stats, owners)
	x.GapsOverLimit = gaps.overLimit
	x.LongestGapSeconds = sampleQuantile(1, gaps.gaps)
	x.GapP50Seconds, x.GapP99Seconds = sampleQuantile(0.5, gaps.gaps), sampleQuantile(0.99, gaps.gaps)
	for i := range x.Restarts {
		rr := &x.Restarts[i]
		rr.Shoots, rr.LongestGapSeconds = gaps.shootsBy[rr.Replica], gaps.longestBy[rr.Replica]
	}
}
