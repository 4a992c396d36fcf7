package benchmarks

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// outageSettle is how long, in probe intervals, the outage scenario keeps measuring after every shoot
// was probed again by its owner: for windows and writes that come late.
const outageSettle = 2

// outageWindowsTimeout bounds the wait for the weeding windows of the replicas' start to close (after
// the weeder config's watchDuration) before the cut.
const outageWindowsTimeout = 2 * time.Minute

// weederWatchDuration is sim.WeederConfig's watchDuration. The outage cuts no earlier than this after
// every shoot was probed: the weeder takes a service it first saw ready less than a watchDuration
// before a fence for one that turned ready then, and opens a window for it after the heal. A service
// is first seen ready when the replica starts; in the steady state a seed's outage meets, none is.
const weederWatchDuration = 30 * time.Second

// outage cuts every replica from the seed's API server at once, heals the cut after the outage
// duration, and measures how the replicas come back.
func (b *bench) outage(ctx context.Context, shoots, replicas int) (*Outage, error) {
	rs, err := b.replicaSet(benchProfile)
	if err != nil {
		return nil, err
	}
	rs.ProxyTo = b.seed // each replica reaches the seed through a proxy of its own, which the outage cuts
	defer rs.Close()
	tracker, stop, err := b.startTracked(ctx, shoots, replicas, rs)
	if err != nil {
		return nil, err
	}
	defer stop()
	x := &Outage{Shoots: shoots, Replicas: replicas, ResumeTimeoutSeconds: restartResumeTimeout(b.opts.Interval).Seconds(),
		SettleSeconds: (outageSettle * b.opts.Interval).Seconds()}
	if err := b.quietBeforeCut(ctx, x); err != nil {
		return x, err
	}
	owners := ownersOf(b.seed.Shoots.Callers())
	s0 := b.snapshot(ctx)
	tracker.mark()
	b.scaling.mark()
	heal, err := b.cut(ctx, x)
	if err != nil {
		return x, err
	}
	sHeal := b.snapshot(ctx)
	x.PartitionLeaseWritesCut, x.ScaleWritesCut = tracker.writes(), b.scaling.writes()
	if err := b.awaitOwners(ctx, owners, heal, x); err != nil {
		return x, err
	}
	if err := b.superviseFor(ctx, seconds(x.SettleSeconds), x); err != nil {
		return x, err
	}
	b.tallyHealed(x, tracker, s0, sHeal, b.snapshot(ctx), owners)
	return x, nil
}

// quietBeforeCut waits a weeder watch duration after the start settled, then until no weeding window
// is open, and records when the cut comes and how many windows it found open.
func (b *bench) quietBeforeCut(ctx context.Context, x *Outage) error {
	settled := time.Now()
	if err := pause(ctx, weederWatchDuration); err != nil {
		return err
	}
	var err error
	if x.WeederWindowsOpenAtCut, err = b.awaitWindowsClosed(ctx); err != nil {
		return err
	}
	x.CutAfterSeconds = time.Since(settled).Seconds()
	fmt.Fprintf(b.out, "outage, %d shoots × %d replicas: the seed's API server cut for %s, %.0fs after the start settled (%.0f weeding windows open)\n",
		x.Shoots, x.Replicas, b.opts.Outage, x.CutAfterSeconds, x.WeederWindowsOpenAtCut)
	return nil
}

// tallyHealed records what the replicas wrote and did from the heal (metrics snapshot sHeal) to the
// end of the settling (sEnd), s0 being the snapshot before the cut and owners the shoots' owners then.
func (b *bench) tallyHealed(x *Outage, tracker *leaseTracker, s0, sHeal, sEnd snapshot, owners map[string]string) {
	x.PartitionLeaseWritesHealed = minus(tracker.writes(), x.PartitionLeaseWritesCut)
	x.ScaleWritesHealed = b.scaling.writes() - x.ScaleWritesCut
	x.PartitionsMoved, x.PartitionsHeldByOthers = tracker.moved()
	x.WeederWindowsOpened = countersByLabel(sHeal, sEnd, "dwd_weeder_windows_opened_total", "", "service")
	for _, r := range b.replicas {
		x.SelfFencings += counterIncrease(s0, sEnd, r.Name, "dwd_sharding_self_fencing_total", "")
	}
	x.ProbedByOthers = probedByOthers(b.seed.Shoots.ProbeStats(), owners)
	fmt.Fprintf(b.out, "  resumed after %.2fs (p99 %.2fs), %d not; %d partitions moved (%d held by others meanwhile); partition lease writes cut %s, healed %s; weeder windows %v; scale writes %d cut, %d healed\n",
		x.ResumedSeconds, x.ResumedP99Seconds, x.NotResumed, x.PartitionsMoved, x.PartitionsHeldByOthers, x.PartitionLeaseWritesCut,
		x.PartitionLeaseWritesHealed, x.WeederWindowsOpened, x.ScaleWritesCut, x.ScaleWritesHealed)
}

// cut cuts every replica from the seed for the outage duration, starting a replica whose process
// ended again at once as a kubelet would, heals the cuts and returns the moment of the heal.
func (b *bench) cut(ctx context.Context, x *Outage) (time.Time, error) {
	start := time.Now()
	for _, r := range b.replicas {
		if err := r.Cut(); err != nil {
			return time.Time{}, err
		}
	}
	err := b.superviseFor(ctx, b.opts.Outage, x)
	// The probe windows start right before the heal: a probe after it is one the heal let through.
	b.seed.Shoots.MarkProbes()
	heal := time.Now()
	for _, r := range b.replicas {
		r.Heal()
	}
	x.OutageSeconds = heal.Sub(start).Seconds()
	return heal, err
}

// superviseFor lets d pass, starting again at once any replica whose process ended, and records it.
func (b *bench) superviseFor(ctx context.Context, d time.Duration, x *Outage) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, d, true, func(context.Context) (bool, error) {
		return false, b.restartExited(x)
	})
	if err != nil && ctx.Err() == nil && !wait.Interrupted(err) {
		return err
	}
	return ctx.Err()
}

// restartExited starts again every replica whose process ended, and records it.
func (b *bench) restartExited(x *Outage) error {
	for _, r := range b.replicas {
		if r.Running() {
			continue
		}
		x.Exited = append(x.Exited, r.Name)
		fmt.Fprintf(b.out, "  %s exited; starting it again\n", r.Name)
		if err := r.Restart(); err != nil {
			return err
		}
	}
	return nil
}

// awaitOwners waits until every shoot was probed again by its owner before the outage and every
// replica is ready, or the resume timeout passes (no error: the figures say what is missing).
func (b *bench) awaitOwners(ctx context.Context, owners map[string]string, heal time.Time, x *Outage) error {
	timeout := seconds(x.ResumeTimeoutSeconds)
	var first map[string]time.Time
	var ready time.Time
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := b.restartExited(x); err != nil {
			return false, err
		}
		if ready.IsZero() && b.allReady(ctx) {
			ready = time.Now()
		}
		first = firstByOwner(b.seed.Shoots.ProbeStats(), owners)
		return len(first) == len(owners) && !ready.IsZero(), nil
	})
	if err != nil && (ctx.Err() != nil || !wait.Interrupted(err)) {
		return err
	}
	x.ReadySeconds = -1
	if !ready.IsZero() {
		x.ReadySeconds = ready.Sub(heal).Seconds()
	}
	names := make([]string, 0, len(owners))
	for shoot := range owners {
		names = append(names, shoot)
	}
	// A replica that never stopped probing probed its shoots before the heal: 0, not less.
	resumed := since(func(string) time.Time { return heal }, names, first, timeout)
	for i, s := range resumed.done {
		resumed.done[i] = max(s, 0)
	}
	x.NotResumed = resumed.missing
	x.ResumedP50Seconds, x.ResumedP99Seconds, x.ResumedSeconds = resumed.quantiles()
	return nil
}

// awaitWindowsClosed waits until no replica has a weeding window open or queued, and returns how many
// were when it gave up (no error). A fresh start opens one for every ready service; in the steady
// state the outage should begin from, none are open.
func (b *bench) awaitWindowsClosed(ctx context.Context) (float64, error) {
	open := 0.0
	err := wait.PollUntilContextTimeout(ctx, time.Second, outageWindowsTimeout, true, func(ctx context.Context) (bool, error) {
		open = 0
		for _, r := range b.replicas {
			m := r.Metrics(ctx)
			if m == nil {
				return false, exited(b.replicas)
			}
			open += sim.Sum(m, "dwd_weeder_windows_open", "") + sim.Sum(m, "dwd_weeder_windows_queued", "")
		}
		return open == 0, nil
	})
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return open, nil
	}
	return open, err
}

// allReady reports whether every replica's /readyz answers 200.
func (b *bench) allReady(ctx context.Context) bool { return sim.AllReady(ctx, b.replicas) }
