package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// Demo is the state of one demo run: the seed, the replicas of Set that run on it, and the steps
// played so far. SetUp builds one; a story of its own (the end-to-end tests) may build one on a seed
// it started, with Out, Seed and Options, and play the steps it needs.
type Demo struct {
	// Out receives the steps, the live view and the summary; several goroutines write to it.
	Out     io.Writer
	Seed    *sim.Seed
	Options Options
	// Set starts the replicas; Replicas are those started, in name order, running or not.
	Set      *sim.ReplicaSet
	Replicas []*sim.Replica
	// Namespace is the replicas' own: their ServiceAccount's and their Leases'.
	Namespace string
	// kubeconfig is the replicas' kubeconfig, which impersonates their ServiceAccount.
	kubeconfig string

	mu      sync.Mutex
	results []stepResult
}

// stepResult is one step of the script and whether it did what it should.
type stepResult struct {
	name   string
	ok     bool
	took   time.Duration
	detail string
}

// Step runs one step of the script; run returns a detail line or an error.
func (d *Demo) Step(ctx context.Context, name string, run func(ctx context.Context) (string, error)) bool {
	fmt.Fprintf(d.Out, "\n▶ %s\n", name)
	start := time.Now()
	detail, err := run(ctx)
	r := stepResult{name: name, ok: err == nil, took: time.Since(start), detail: detail}
	if err != nil {
		r.detail = err.Error()
	}
	d.mu.Lock()
	d.results = append(d.results, r)
	d.mu.Unlock()
	mark := "✔"
	if !r.ok {
		mark = "✘"
	}
	fmt.Fprintf(d.Out, "%s %s (%s): %s\n", mark, name, r.took.Round(100*time.Millisecond), r.detail)
	return r.ok
}

// play runs the script; a step that cannot go on without the ones before ends it.
func (d *Demo) play(ctx context.Context) {
	meltdown := []string{sim.ShootName(1), sim.ShootName(2), sim.ShootName(3)}
	if !d.Step(ctx, fmt.Sprintf("Start %d replicas; they share %d partitions and probe every shoot", d.Options.Replicas, sim.Partitions), d.StartReplicas) {
		return
	}
	if d.Step(ctx, "Meltdown: the kubelets of 3 shoots lose their API server → scale-down in level order", func(ctx context.Context) (string, error) {
		return d.Meltdown(ctx, meltdown)
	}) {
		d.Step(ctx, "Recovery: the leases renew → scale-up in level order to the replicas before", func(ctx context.Context) (string, error) {
			return d.Recover(ctx, meltdown)
		})
	}
	victim := d.Replicas[len(d.Replicas)-1]
	if d.Step(ctx, "Kill -9 "+victim.Name+" → the others take its shoots after the member lease expires", func(ctx context.Context) (string, error) {
		return d.kill(ctx, victim)
	}) {
		d.Step(ctx, victim.Name+" comes back under the same name → it takes back its share", func(ctx context.Context) (string, error) {
			return d.comeBack(ctx, victim)
		})
	}
	d.Step(ctx, "etcd of 3 shoots recovers → their crash-looping kube-apiservers are restarted", func(ctx context.Context) (string, error) {
		return d.Weed(ctx, []string{sim.ShootName(4), sim.ShootName(5), sim.ShootName(6)})
	})
	if len(d.Replicas) > 1 {
		leaver := d.Replicas[len(d.Replicas)-2]
		d.Step(ctx, "SIGTERM "+leaver.Name+" → it hands its shoots over as it leaves, no shoot goes unprobed", func(ctx context.Context) (string, error) {
			return d.handOver(ctx, leaver)
		})
	}
}

// StartReplicas starts the replicas and waits until the partitions are shared and every shoot probed.
func (d *Demo) StartReplicas(ctx context.Context) (string, error) {
	return d.StartReplicasWithin(ctx, 90*time.Second)
}

// StartReplicasWithin starts the replicas and waits until the partitions are shared and every shoot
// probed, for timeout at most.
func (d *Demo) StartReplicasWithin(ctx context.Context, timeout time.Duration) (string, error) {
	for i := range d.Options.Replicas {
		r, err := d.Set.Start(fmt.Sprintf("dwd-%d", i))
		if err != nil {
			return "", err
		}
		d.Replicas = append(d.Replicas, r)
	}
	err := d.Until(ctx, timeout, func(ctx context.Context) bool {
		held, probing := d.Totals(ctx)
		return held == sim.Partitions && probing == float64(d.Options.Shoots)
	})
	if err != nil {
		held, probing := d.Totals(ctx)
		return "", fmt.Errorf("partitions and probes not shared within %s (%.0f of %d partitions held, %.0f of %d shoots probed): %w",
			timeout, held, sim.Partitions, probing, d.Options.Shoots, err)
	}
	return d.shares(ctx), nil
}

// handoverLimit is how soon after a graceful stop the others must hold the leaver's share: a leave
// releases its partitions at once, so this is seconds, not a member lease duration. A replica of both
// roles leaves two groups, whose about 600 partition leases the others take over under the race
// detector in `make test`, beside other test packages on 2 cores: 5 s was missed now and then.
const handoverLimit = 10 * time.Second

// handOver stops a replica gracefully and checks that the others hold its whole share within
// handoverLimit, that every shoot is probed again after it stopped, and that no shoot waited longer
// than a probe interval plus handoverLimit between two probes.
func (d *Demo) handOver(ctx context.Context, leaver *sim.Replica) (string, error) {
	d.Seed.Shoots.MarkProbes()
	start := time.Now()
	if !leaver.Terminate(10 * time.Second) {
		return "", errors.New("it did not stop within 10s of SIGTERM, and was killed")
	}
	stopped := time.Now()
	err := d.Until(ctx, handoverLimit, func(ctx context.Context) bool {
		held, probing := d.Totals(ctx)
		return held == sim.Partitions && probing == float64(d.Options.Shoots)
	})
	if err != nil {
		return "", fmt.Errorf("its share was not held by the others within %s of its exit: %w", handoverLimit, err)
	}
	held := time.Since(stopped)
	if err := d.Until(ctx, 2*ProbeInterval+handoverLimit, func(context.Context) bool {
		return len(UnprobedSince(d.Seed.Shoots.ProbeStats(), stopped)) == 0
	}); err != nil {
		return "", fmt.Errorf("shoots not probed since it stopped: %v", UnprobedSince(d.Seed.Shoots.ProbeStats(), stopped))
	}
	shoot, gap := LongestGap(d.Seed.Shoots.ProbeStats(), time.Now())
	if limit := ProbeInterval + handoverLimit; gap > limit {
		return "", fmt.Errorf("%s went unprobed for %s, more than %s", shoot, gap.Round(10*time.Millisecond), limit)
	}
	return fmt.Sprintf("it stopped %s after SIGTERM, the others held its share %s later; longest gap between two probes of a shoot %s; %s",
		stopped.Sub(start).Round(10*time.Millisecond), held.Round(10*time.Millisecond), gap.Round(10*time.Millisecond), d.shares(ctx)), nil
}

// UnprobedSince returns the shoots whose last probe was before t, sorted.
func UnprobedSince(stats map[string]sim.ProbeStats, t time.Time) []string {
	var names []string
	for name, s := range stats {
		if s.Last.Before(t) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// LongestGap returns the shoot that waited longest between two probes since the mark, and how long.
func LongestGap(stats map[string]sim.ProbeStats, now time.Time) (string, time.Duration) {
	var shoot string
	var longest time.Duration
	for name, s := range stats {
		if gap := s.Gap(now); gap > longest || gap == longest && name < shoot {
			shoot, longest = name, gap
		}
	}
	return shoot, longest
}

// Totals sums the shoots probed over the running replicas, and the partitions they hold in each
// group, and returns the smaller of those: every group holds all its partitions when it is the
// partition count.
func (d *Demo) Totals(ctx context.Context) (held, probing float64) {
	byGroup := make([]float64, len(sim.Groups))
	for _, r := range d.Replicas {
		m := r.Metrics(ctx, "dwd_sharding_partitions_held", "dwd_probes_active")
		for i, g := range sim.Groups {
			byGroup[i] += sim.Sum(m, "dwd_sharding_partitions_held", "group="+g)
		}
		probing += sim.Sum(m, "dwd_probes_active", "")
	}
	return slices.Min(byGroup), probing
}

// shares describes how many shoots each replica probes.
func (d *Demo) shares(ctx context.Context) string {
	s := "shoots probed per replica:"
	for _, r := range d.Replicas {
		s += fmt.Sprintf(" %s=%.0f", r.Name, r.Sum(ctx, "dwd_probes_active", ""))
	}
	return s
}

// Until polls cond every 200ms until it holds or timeout passes.
func (d *Demo) Until(ctx context.Context, timeout time.Duration, cond func(context.Context) bool) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
}

// deployment reads a dependent Deployment.
func (d *Demo) deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	dep := &appsv1.Deployment{}
	return dep, d.Seed.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep)
}

// allDependents reports whether every dependent of every shoot has want replicas.
func (d *Demo) allDependents(ctx context.Context, shoots []string, want func(name string) int32) bool {
	for _, ns := range shoots {
		for name := range sim.Dependents {
			dep, err := d.deployment(ctx, ns, name)
			if err != nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != want(name) {
				return false
			}
		}
	}
	return true
}

// podGone reports whether a pod no longer exists.
func (d *Demo) podGone(ctx context.Context, ns, name string) bool {
	err := d.Seed.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	return apierrors.IsNotFound(err)
}

// TearDown stops the replicas, side by side, and the seed.
func (d *Demo) TearDown() {
	sim.TerminateRunning(d.Replicas, 10*time.Second)
	if err := d.Seed.Stop(); err != nil {
		fmt.Fprintln(d.Out, "stopping the seed:", err)
	}
}

// Summary prints every step and returns an error when one failed.
func (d *Demo) Summary() error {
	fmt.Fprintf(d.Out, "\nSummary (replica logs in %s):\n", d.Options.Dir)
	failed := 0
	for _, r := range d.results {
		mark := "✔"
		if !r.ok {
			mark, failed = "✘", failed+1
		}
		fmt.Fprintf(d.Out, "  %s %-95s %6s\n", mark, r.name, r.took.Round(100*time.Millisecond))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d steps did not do what they should", failed, len(d.results))
	}
	fmt.Fprintf(d.Out, "All %d steps did what they should.\n", len(d.results))
	return nil
}
