package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// demo is the state of one demo run.
type demo struct {
	out      io.Writer
	seed     *sim.Seed
	opts     demoOptions
	rs       *replicaSet
	replicas []*replica

	mu      sync.Mutex
	results []stepResult
	actions []string // the last things the replicas did, newest last
}

// stepResult is one step of the script and whether it did what it should.
type stepResult struct {
	name   string
	ok     bool
	took   time.Duration
	detail string
}

// step runs one step of the script; run returns a detail line or an error.
func (d *demo) step(ctx context.Context, name string, run func(ctx context.Context) (string, error)) bool {
	fmt.Fprintf(d.out, "\n▶ %s\n", name)
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
	fmt.Fprintf(d.out, "%s %s (%s): %s\n", mark, name, r.took.Round(100*time.Millisecond), r.detail)
	return r.ok
}

// play runs the script; a step that cannot go on without the ones before ends it.
func (d *demo) play(ctx context.Context) {
	meltdown := []string{sim.ShootName(1), sim.ShootName(2), sim.ShootName(3)}
	if !d.step(ctx, fmt.Sprintf("Start %d replicas; they share %d partitions and probe every shoot", d.opts.replicas, partitions), d.startReplicas) {
		return
	}
	if d.step(ctx, "Meltdown: the kubelets of 3 shoots lose their API server → scale-down in level order", func(ctx context.Context) (string, error) {
		return d.meltdown(ctx, meltdown)
	}) {
		d.step(ctx, "Recovery: the leases renew → scale-up in level order to the replicas before", func(ctx context.Context) (string, error) {
			return d.recover(ctx, meltdown)
		})
	}
	victim := d.replicas[len(d.replicas)-1]
	if d.step(ctx, "Kill -9 "+victim.name+" → the others take its shoots after the member lease expires", func(ctx context.Context) (string, error) {
		return d.kill(ctx, victim)
	}) {
		d.step(ctx, victim.name+" comes back under the same name → it takes back its share", func(ctx context.Context) (string, error) {
			return d.comeBack(ctx, victim)
		})
	}
	d.step(ctx, "etcd of 3 shoots recovers → their crash-looping kube-apiservers are restarted", func(ctx context.Context) (string, error) {
		return d.weed(ctx, []string{sim.ShootName(4), sim.ShootName(5), sim.ShootName(6)})
	})
}

// startReplicas starts the replicas and waits until the partitions are shared and every shoot probed.
func (d *demo) startReplicas(ctx context.Context) (string, error) {
	for i := range d.opts.replicas {
		r, err := d.rs.start(fmt.Sprintf("dwd-%d", i))
		if err != nil {
			return "", err
		}
		d.replicas = append(d.replicas, r)
	}
	err := d.until(ctx, 90*time.Second, func(ctx context.Context) bool {
		held, probing := d.totals(ctx)
		return held == partitions && probing == float64(d.opts.shoots)
	})
	if err != nil {
		return "", fmt.Errorf("partitions and probes not shared in time: %w", err)
	}
	return d.shares(ctx), nil
}

// totals sums the partitions held and the shoots probed over the running replicas.
func (d *demo) totals(ctx context.Context) (held, probing float64) {
	for _, r := range d.replicas {
		m := r.metrics(ctx)
		held += sum(m, "dwd_sharding_partitions_held", "")
		probing += sum(m, "dwd_probes_active", "")
	}
	return held, probing
}

// shares describes how many shoots each replica probes.
func (d *demo) shares(ctx context.Context) string {
	s := "shoots probed per replica:"
	for _, r := range d.replicas {
		s += fmt.Sprintf(" %s=%.0f", r.name, sum(r.metrics(ctx), "dwd_probes_active", ""))
	}
	return s
}

// until polls cond every 200ms until it holds or timeout passes.
func (d *demo) until(ctx context.Context, timeout time.Duration, cond func(context.Context) bool) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
}

// replicas reads a dependent Deployment's replicas.
func (d *demo) deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	dep := &appsv1.Deployment{}
	return dep, d.seed.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep)
}

// allDependents reports whether every dependent of every shoot has want replicas.
func (d *demo) allDependents(ctx context.Context, shoots []string, want func(name string) int32) bool {
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
func (d *demo) podGone(ctx context.Context, ns, name string) bool {
	err := d.seed.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	return apierrors.IsNotFound(err)
}

// tearDown stops the replicas and the seed.
func (d *demo) tearDown() {
	for _, r := range d.replicas {
		if r.running() {
			r.terminate(10 * time.Second)
		}
	}
	if err := d.seed.Stop(); err != nil {
		fmt.Fprintln(d.out, "stopping the seed:", err)
	}
}

// summary prints every step and returns an error when one failed.
func (d *demo) summary() error {
	fmt.Fprintf(d.out, "\nSummary (replica logs in %s):\n", d.opts.dir)
	failed := 0
	for _, r := range d.results {
		mark := "✔"
		if !r.ok {
			mark, failed = "✘", failed+1
		}
		fmt.Fprintf(d.out, "  %s %-95s %6s\n", mark, r.name, r.took.Round(100*time.Millisecond))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d steps did not do what they should", failed, len(d.results))
	}
	fmt.Fprintf(d.out, "All %d steps did what they should.\n", len(d.results))
	return nil
}
