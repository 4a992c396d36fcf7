package benchmarks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// steadyWarmUp is how many probe intervals a steady run waits after every shoot was probed before it
// measures: a takeover probes every shoot at once, and the jitter of the following cycles
// spreads them out.
const steadyWarmUp = 3

// warmUp is how long a steady measurement waits before its window.
func (b *bench) warmUp() time.Duration { return steadyWarmUp * b.opts.Interval }

// window waits warmUp, then snapshots the running replicas at the start and the end of the steady
// duration.
func (b *bench) window(ctx context.Context) (s0, s1 snapshot, err error) {
	if err := pause(ctx, b.warmUp()); err != nil {
		return s0, s1, err
	}
	s0 = b.snapshot(ctx)
	if err := pause(ctx, b.opts.Duration); err != nil {
		return s0, s1, err
	}
	return s0, b.snapshot(ctx), nil
}

// steady measures one load: shoots healthy, probed by replicas, for the configured duration.
func (b *bench) steady(ctx context.Context, shoots, replicas int) (SteadyRun, error) {
	run := SteadyRun{Shoots: shoots, Replicas: replicas}
	if err := b.startFresh(ctx, shoots, replicas, b.rs); err != nil {
		return run, err
	}
	defer b.stopAll()
	fmt.Fprintf(b.out, "steady %d shoots × %d replicas: warming up %s, measuring %s\n", shoots, replicas, b.warmUp(), b.opts.Duration)
	s0, s1, err := b.window(ctx)
	if err != nil {
		return run, err
	}
	if len(s1.metrics) != replicas || len(s0.metrics) != replicas {
		return run, fmt.Errorf("only %d of %d replicas answered", min(len(s0.metrics), len(s1.metrics)), replicas)
	}
	elapsed := s1.at.Sub(s0.at).Seconds()
	run.DurationSeconds = elapsed
	var seedWatchdog, seedSharding float64
	for _, r := range b.replicas {
		probes := delta(s0, s1, r.Name, "dwd_probes_total", "")
		healthy := delta(s0, s1, r.Name, "dwd_probes_total", "result=healthy")
		cpu := delta(s0, s1, r.Name, "process_cpu_seconds_total", "")
		run.Probes += probes
		run.UnhealthyProbes += probes - healthy
		run.MissedCycles += delta(s0, s1, r.Name, "dwd_probe_missed_cycles_total", "")
		run.ProbesPerSecondPerReplica = append(run.ProbesPerSecondPerReplica, probes/elapsed)
		run.CPUCores = append(run.CPUCores, cpu/elapsed)
		run.CPUSecondsPer1000Probes = append(run.CPUSecondsPer1000Probes, cpu/max(probes, 1)*1000)
		run.CPUSecondsPer1000HealthyProbes = append(run.CPUSecondsPer1000HealthyProbes, cpu/max(healthy, 1)*1000)
		run.RSSBytes = append(run.RSSBytes, sim.Sum(s1.metrics[r.Name], "process_resident_memory_bytes", ""))
		seedWatchdog += delta(s0, s1, r.Name, "dwd_api_requests_total", "api=seed,client=watchdog")
		seedSharding += delta(s0, s1, r.Name, "dwd_api_requests_total", "api=seed,client=sharding")
	}
	probes := max(run.Probes, 1)
	run.ProbesPerSecond = run.Probes / elapsed
	lag := histogramDelta(s0, s1, "dwd_probe_lag_seconds")
	run.ProbeLagP50Seconds, run.ProbeLagP99Seconds = histogramQuantile(0.5, lag), histogramQuantile(0.99, lag)
	run.SeedWatchdogRequestsPerProbe, run.SeedShardingRequestsPerProbe = seedWatchdog/probes, seedSharding/probes
	run.SeedRequestsPerProbe = (seedWatchdog + seedSharding) / probes
	run.ShootRequestsPerProbe = float64(s1.shoots.Total-s0.shoots.Total) / probes
	run.ConsistentLeaseListsPerProbe = float64(s1.shoots.LeaseLists.Consistent-s0.shoots.LeaseLists.Consistent) / probes
	if err := b.churn(ctx, &run, s1); err != nil {
		return run, err
	}
	fmt.Fprintf(b.out, "  %.1f probes/s, lag p50 %.3fs p99 %.3fs, %.0f missed cycles, CPU cores %v, seed req/probe %.4f, shoot req/probe %.2f (consistent lease lists %.4f)\n",
		run.ProbesPerSecond, run.ProbeLagP50Seconds, run.ProbeLagP99Seconds, run.MissedCycles, rounded(run.CPUCores),
		run.SeedRequestsPerProbe, run.ShootRequestsPerProbe, run.ConsistentLeaseListsPerProbe)
	return run, nil
}

// churn changes every shoot's kubeconfig Secret once, after the measured window, and records the
// watch events each replica's caches received of it, with the objects they hold: a replica whose
// API server selects its share receives the events of its share only.
func (b *bench) churn(ctx context.Context, run *SteadyRun, before snapshot) error {
	if _, ok := before.metrics[b.replicas[0].Name]["dwd_cache_objects"]; !ok {
		return nil // a dwd without sharded caches
	}
	if err := b.seed.TouchSecrets(ctx, 0, run.Shoots); err != nil {
		return fmt.Errorf("changing the kubeconfig Secrets: %w", err)
	}
	const secretEvents = "resource=Secret,via=watch"
	var after snapshot
	last := -1.0
	// The events of the change have all arrived once no replica's count grew for a second.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, false, func(ctx context.Context) (bool, error) {
		after = b.snapshot(ctx)
		total := 0.0
		for _, r := range b.replicas {
			total += delta(before, after, r.Name, "dwd_cache_objects_received_total", secretEvents)
		}
		settled := total == last && total > 0
		last = total
		return settled, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Secrets' watch events: %w", err)
	}
	for _, r := range b.replicas {
		run.CacheObjects = append(run.CacheObjects, sim.Sum(before.metrics[r.Name], "dwd_cache_objects", ""))
		run.ChurnEventsReceived = append(run.ChurnEventsReceived, delta(before, after, r.Name, "dwd_cache_objects_received_total", secretEvents))
	}
	fmt.Fprintf(b.out, "  caches hold %v objects; a change of every kubeconfig Secret: %v watch events received\n", run.CacheObjects, run.ChurnEventsReceived)
	return nil
}

// memberWritesWindow is how long the handover scenario counts the settled group's member lease writes.
const memberWritesWindow = 20 * time.Second

// handover plays a graceful leave, a join, a kill and a join again, repeats times, each time with
// another victim, and measures how long until every moved shoot is probed by its new owner.
func (b *bench) handover(ctx context.Context, shoots, replicas int) (*Handover, error) {
	h := &Handover{Shoots: shoots, Replicas: replicas, Repeats: b.opts.Repeats}
	tracker, stop, err := b.startTracked(ctx, shoots, replicas, b.rs)
	if err != nil {
		return nil, err
	}
	defer stop()
	select { // a measurement window, not a wait for a condition
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(memberWritesWindow):
	}
	h.MemberWritesPerSecond = tracker.memberWritesPerSecond()
	ev := &handoverEvents{b: b, tracker: tracker, ideal: float64(shoots) / float64(replicas), writes: map[string][]float64{}}
	leave := func(r *sim.Replica) error { r.Terminate(30 * time.Second); b.forget(r); return nil }
	kill := func(r *sim.Replica) error { r.Kill(); b.forget(r); return nil }
	join := func(r *sim.Replica) error { return b.rejoin(r) }
	fmt.Fprintf(b.out, "handover, %d shoots × %d replicas, %d times each\n", shoots, replicas, b.opts.Repeats)
	for i := range b.opts.Repeats {
		victim := b.replicas[i%len(b.replicas)]
		for _, e := range []struct {
			name    string
			do      func(*sim.Replica) error
			samples *[]float64
		}{
			{"leave", leave, &h.GracefulSeconds}, {"join", join, &h.JoinSeconds},
			{"kill -9", kill, &h.KillSeconds}, {"join", join, &h.JoinSeconds},
		} {
			took, err := ev.play(ctx, e.name, e.do, victim)
			if err != nil {
				return nil, err
			}
			*e.samples = append(*e.samples, took)
			if e.name == "join" {
				h.BalanceMaxOverMean = max(h.BalanceMaxOverMean, b.balance())
			}
		}
	}
	h.GracefulLateSeconds = ev.late
	h.HandoverGracefulLateP99 = sampleQuantile(0.99, h.GracefulLateSeconds)
	h.HandoverGracefulP99Seconds = sampleQuantile(0.99, h.GracefulSeconds)
	h.HandoverJoinP99Seconds = sampleQuantile(0.99, h.JoinSeconds)
	h.HandoverKillP99Seconds = sampleQuantile(0.99, h.KillSeconds)
	h.MovedFractionOverIdeal, h.MovedFractionOverIdealMax = mean(ev.moved), slices.Max(ev.moved)
	h.GracefulWrites, h.JoinWrites, h.KillWrites = mean(ev.writes["leave"]), mean(ev.writes["join"]), mean(ev.writes["kill -9"])
	return h, nil
}

// handoverEvents plays the handover scenario's events and keeps, per event, the moved fraction of the
// shoots over the ideal and the partition lease writes until the group settled, by event name.
type handoverEvents struct {
	b       *bench
	tracker *leaseTracker
	ideal   float64
	moved   []float64
	writes  map[string][]float64
	// late is, per leave, how late the most delayed moved shoot was probed (Handover.GracefulLateSeconds).
	late []float64
}

// play does the event to victim and returns the seconds until every moved shoot was probed by its
// new owner.
func (e *handoverEvents) play(ctx context.Context, name string, do func(victim *sim.Replica) error, victim *sim.Replica) (float64, error) {
	before := e.b.seed.Shoots.Callers()
	e.tracker.mark()
	e.b.seed.Shoots.MarkProbes()
	start := time.Now()
	if err := do(victim); err != nil {
		return 0, err
	}
	settled, n, err := e.b.settle(ctx, start, before, benchLeaseDuration+time.Minute)
	if err != nil {
		return 0, fmt.Errorf("%s of %s: %w", name, victim.Name, err)
	}
	took := settled.Sub(start).Seconds()
	if name == "leave" {
		e.late = append(e.late, e.lateness(before))
	}
	e.moved = append(e.moved, float64(n)/e.ideal)
	w := e.tracker.writes()
	e.writes[name] = append(e.writes[name], float64(w.Total))
	fmt.Fprintf(e.b.out, "  %-8s %s: %d shoots moved, all probed by their new owner after %.2fs; partition lease writes %s\n", name, victim.Name, n, took, w)
	return took, nil
}

// lateness returns how much later than a probe interval after the probe before it the most delayed
// shoot that changed replica since before was probed, in seconds (0 when none came late).
func (e *handoverEvents) lateness(before map[string]sim.Caller) float64 {
	stats, after := e.b.seed.Shoots.ProbeStats(), e.b.seed.Shoots.Callers()
	late, latest, unmoved := 0.0, "", 0.0
	for shoot, c := range after {
		switch l := (stats[shoot].MaxGap - e.b.opts.Interval).Seconds(); {
		case memberOf(before[shoot].Agent) == memberOf(c.Agent):
			unmoved = max(unmoved, l)
		case l > late:
			late, latest = l, shoot
		}
	}
	if latest != "" {
		st := stats[latest]
		fmt.Fprintf(e.b.out, "           the latest, %s: %.2fs between a probe by %s at %s and one by %s at %s\n", latest,
			st.MaxGap.Seconds(), memberOf(st.MaxGapFrom), st.MaxGapEnd.Add(-st.MaxGap).Format("15:04:05.000"),
			memberOf(st.MaxGapTo), st.MaxGapEnd.Format("15:04:05.000"))
	}
	fmt.Fprintf(e.b.out, "           the shoots that stayed: at most %.2fs later than an interval (the probe period's jitter, the load)\n", unmoved)
	return late
}

// meltdown expires the node leases of some shoots at once and measures until the first scale-down
// write of each, then lets them recover before the next round.
func (b *bench) meltdown(ctx context.Context, shoots, replicas int) (*Meltdown, error) {
	m := &Meltdown{Shoots: shoots}
	if len(b.replicas) != replicas || b.shoots != shoots {
		if err := b.startFresh(ctx, shoots, replicas, b.rs); err != nil {
			return nil, err
		}
	}
	defer b.stopAll()
	fmt.Fprintf(b.out, "meltdown, %d shoots × %d replicas, %d rounds of %d shoots\n", shoots, replicas, b.opts.Meltdowns, b.opts.MeltdownShoots)
	for round := range b.opts.Meltdowns {
		var names []string
		for j := range b.opts.MeltdownShoots {
			names = append(names, sim.ShootName((j*shoots/b.opts.MeltdownShoots+round)%shoots))
		}
		samples, err := b.meltdownRound(ctx, names)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round+1, err)
		}
		m.DetectionToScaledownSeconds = append(m.DetectionToScaledownSeconds, samples...)
		fmt.Fprintf(b.out, "  round %d: first scale-down write %.2f–%.2fs after the leases expired\n", round+1, slices.Min(samples), slices.Max(samples))
	}
	m.Samples = len(m.DetectionToScaledownSeconds)
	m.DetectionToScaledownP50Seconds = sampleQuantile(0.5, m.DetectionToScaledownSeconds)
	m.DetectionToScaledownP99Seconds = sampleQuantile(0.99, m.DetectionToScaledownSeconds)
	return m, nil
}

// meltdownRound melts the shoots down, returns the seconds until each one's first scale-down write,
// and waits until they are scaled up again.
func (b *bench) meltdownRound(ctx context.Context, names []string) ([]float64, error) {
	firstDown, stop, err := b.watchScaleDowns(ctx, names)
	if err != nil {
		return nil, err
	}
	defer stop()
	expired := map[string]time.Time{}
	for _, ns := range names {
		if err := b.seed.Shoots.SetScenario(ns, sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 1}); err != nil {
			return nil, err
		}
		expired[ns] = b.seed.Shoots.ScaleDownDue(ns)
	}
	var samples []float64
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, sim.ExpiredAge+b.opts.Interval+time.Minute, true, func(context.Context) (bool, error) {
		downs := firstDown()
		if len(downs) < len(names) {
			return false, nil
		}
		samples = samples[:0]
		for ns, at := range downs {
			samples = append(samples, at.Sub(expired[ns]).Seconds())
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("only %d of %d shoots scaled down: %w", len(firstDown()), len(names), err)
	}
	for _, ns := range names {
		if err := b.seed.Shoots.SetScenario(ns, sim.Scenario{Kind: sim.Healthy}); err != nil {
			return nil, err
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 4*b.opts.Interval+time.Minute, true, func(ctx context.Context) (bool, error) {
		return b.scaledUp(ctx, names), nil
	})
	if err != nil {
		return nil, fmt.Errorf("not scaled up again: %w", err)
	}
	return samples, nil
}

// watchScaleDowns watches the dependents of the shoots and records when each shoot's first
// dependent was scaled below its replicas.
func (b *bench) watchScaleDowns(ctx context.Context, names []string) (func() map[string]time.Time, func(), error) {
	cs, err := kubernetes.NewForConfig(b.seed.Env.Config)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	first := map[string]time.Time{}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, ns := range names {
		w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			wg.Wait()
			return nil, nil, err
		}
		wg.Go(func() {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-w.ResultChan():
					if !ok {
						return
					}
					dep, isDep := e.Object.(*appsv1.Deployment)
					if !isDep || dep.Spec.Replicas == nil || *dep.Spec.Replicas >= sim.Dependents[dep.Name] {
						continue
					}
					mu.Lock()
					if _, seen := first[ns]; !seen {
						first[ns] = time.Now()
					}
					mu.Unlock()
				}
			}
		})
	}
	get := func() map[string]time.Time {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(first)
	}
	return get, func() { cancel(); wg.Wait() }, nil
}

// scaledUp reports whether every dependent of the shoots has its replicas back.
func (b *bench) scaledUp(ctx context.Context, names []string) bool {
	for _, ns := range names {
		for name, want := range sim.Dependents {
			dep := &appsv1.Deployment{}
			err := b.seed.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep)
			if err != nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != want {
				return false
			}
		}
	}
	return true
}

// startTracked starts replicas of rs over shoots afresh (startFresh) and a tracker of the group's
// leases; stop stops the tracker, then the replicas.
func (b *bench) startTracked(ctx context.Context, shoots, replicas int, rs *sim.ReplicaSet) (*leaseTracker, func(), error) {
	if err := b.startFresh(ctx, shoots, replicas, rs); err != nil {
		return nil, nil, err
	}
	tracker, err := startLeaseTracker(ctx, b.seed.Env.Config)
	if err != nil {
		b.stopAll()
		return nil, nil, err
	}
	return tracker, func() { tracker.stop(); b.stopAll() }, nil
}

// startFresh stops the replicas, makes sure there are shoots, starts replicas of the set and waits
// until every shoot has been probed by its owner.
func (b *bench) startFresh(ctx context.Context, shoots, replicas int, rs *sim.ReplicaSet) error {
	b.stopAll()
	if err := b.ensureShoots(ctx, shoots); err != nil {
		return err
	}
	start := time.Now()
	for i := range replicas {
		r, err := rs.Start(fmt.Sprintf("dwd-%d", i))
		if err != nil {
			return err
		}
		b.replicas = append(b.replicas, r)
	}
	settled, _, err := b.settle(ctx, start, nil, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("starting %d replicas: %w", replicas, err)
	}
	fmt.Fprintf(b.out, "%d replicas started; every shoot probed by its owner after %s\n", replicas, settled.Sub(start).Round(100*time.Millisecond))
	return nil
}

// ensureShoots creates shoots until there are n.
func (b *bench) ensureShoots(ctx context.Context, n int) error {
	if b.shoots >= n {
		return nil
	}
	start := time.Now()
	if err := b.seed.CreateShoots(ctx, b.shoots, n, b.opts.Nodes, sim.ProgressPrinter(b.out, "simulated shoots")); err != nil {
		return err
	}
	fmt.Fprintf(b.out, "%d shoots created in %s\n", n-b.shoots, time.Since(start).Round(time.Second))
	b.shoots = n
	return nil
}

// stopAll stops the running replicas gracefully.
func (b *bench) stopAll() {
	sim.TerminateRunning(b.replicas, 30*time.Second)
	b.replicas = nil
}

// forget drops a stopped replica from the running set; rejoin adds it back.
func (b *bench) forget(r *sim.Replica) {
	b.replicas = slices.DeleteFunc(b.replicas, func(x *sim.Replica) bool { return x == r })
}

// rejoin starts a stopped replica again under its name.
func (b *bench) rejoin(r *sim.Replica) error {
	if err := r.Restart(); err != nil {
		return err
	}
	b.replicas = append(b.replicas, r)
	slices.SortFunc(b.replicas, func(x, y *sim.Replica) int { return strings.Compare(x.Name, y.Name) })
	return nil
}

// settle waits until every partition is held by its owner in the ring of the running replicas and
// every shoot was probed by its owner: since start for a shoot whose owner changed from before (all
// shoots when before is nil). It returns when the last moved shoot was first probed by its new owner
// (or when the partitions were seen settled, if later) and how many shoots moved.
func (b *bench) settle(ctx context.Context, start time.Time, before map[string]sim.Caller, timeout time.Duration) (time.Time, int, error) {
	names := make([]string, len(b.replicas))
	for i, r := range b.replicas {
		names[i] = r.Name
	}
	own, err := newOwnership(names)
	if err != nil {
		return time.Time{}, 0, err
	}
	wantHeld := own.held()
	var settled time.Time
	var moved int
	var why string
	// Once a second: the figure comes from the shoot server's clock, not from this poll, and scraping
	// every replica more often would take CPU from the handover it measures.
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		now := time.Now()
		if err := exited(b.replicas); err != nil {
			return false, err
		}
		for _, r := range b.replicas {
			held := r.Sum(ctx, "dwd_sharding_partitions_held", "group="+sim.Groups[0])
			if int(held) != wantHeld[r.Name] {
				why = fmt.Sprintf("%s holds %.0f partitions, its ring share is %d", r.Name, held, wantHeld[r.Name])
				return false, nil
			}
		}
		callers := b.seed.Shoots.Callers()
		last, n := now, 0
		lastProbe := time.Time{}
		for i := range b.shoots {
			shoot := sim.ShootName(i)
			owner, c := own.owner(shoot), callers[shoot]
			if memberOf(c.Agent) != owner {
				why = fmt.Sprintf("%s is probed by %q, its owner is %s", shoot, memberOf(c.Agent), owner)
				return false, nil
			}
			if before != nil && memberOf(before[shoot].Agent) == owner {
				continue
			}
			if !c.Since.After(start) && !(before == nil && c.Last.After(start)) {
				why = fmt.Sprintf("%s not probed by %s since the event", shoot, owner)
				return false, nil
			}
			n++
			if c.Since.After(lastProbe) {
				lastProbe = c.Since
			}
		}
		if n > 0 && before != nil {
			last = lastProbe // exact: the shoot server's clock, not this poll's
		}
		settled, moved = last, n
		return true, nil
	})
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("not settled after %s (%s): %w", timeout, why, err)
	}
	return settled, moved, nil
}

// exited fails when a replica's process has ended: what waits for it to act would wait in vain.
func exited(replicas []*sim.Replica) error {
	for _, r := range replicas {
		if !r.Running() {
			return fmt.Errorf("%s exited (%v); see %s", r.Name, r.State(), r.Log)
		}
	}
	return nil
}

// balance is the most shoots a running replica probes over the mean, from the shoot server.
func (b *bench) balance() float64 {
	count := map[string]int{}
	for _, c := range b.seed.Shoots.Callers() {
		count[memberOf(c.Agent)]++
	}
	most, total := 0, 0
	for _, r := range b.replicas {
		most, total = max(most, count[r.Name]), total+count[r.Name]
	}
	if total == 0 {
		return 0
	}
	return float64(most) / (float64(total) / float64(len(b.replicas)))
}

// pause waits for d unless ctx ends first; a measurement window, not a wait for a condition.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func rounded(values []float64) []string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = fmt.Sprintf("%.3f", v)
	}
	return s
}
