package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// Levels of the demo's prober config.
var (
	downLevels = [][]string{{"machine-controller-manager", "cluster-autoscaler"}, {"kube-controller-manager"}}
	upLevels   = [][]string{{"kube-controller-manager"}, {"machine-controller-manager"}, {"cluster-autoscaler"}}
)

// Meltdown stops the kubelets of the shoots and checks that, once their leases expired, their
// dependents are scaled down in level order.
func (d *Demo) Meltdown(ctx context.Context, shoots []string) (string, error) {
	order, stop, err := d.recordScaling(ctx, shoots)
	if err != nil {
		return "", err
	}
	defer stop()
	var expired time.Time
	for _, ns := range shoots {
		if err := d.Seed.Shoots.SetScenario(ns, sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 1}); err != nil {
			return "", err
		}
		if at := d.Seed.Shoots.ScaleDownDue(ns); at.After(expired) {
			expired = at
		}
	}
	if err := d.Until(ctx, sim.ExpiredAge+30*time.Second, func(ctx context.Context) bool {
		return d.allDependents(ctx, shoots, func(string) int32 { return 0 })
	}); err != nil {
		return "", fmt.Errorf("not scaled down in time: %w", err)
	}
	took := time.Since(expired)
	if err := d.orderSeen(ctx, order, shoots, downLevels, 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d shoots scaled down %s after their leases expired (probe interval %s), level by level",
		len(shoots), took.Round(100*time.Millisecond), ProbeInterval), nil
}

// Recover renews the leases again and checks the scale-up.
func (d *Demo) Recover(ctx context.Context, shoots []string) (string, error) {
	order, stop, err := d.recordScaling(ctx, shoots)
	if err != nil {
		return "", err
	}
	defer stop()
	for _, ns := range shoots {
		if err := d.Seed.Shoots.SetScenario(ns, sim.Scenario{Kind: sim.Healthy}); err != nil {
			return "", err
		}
	}
	if err := d.Until(ctx, 60*time.Second, func(ctx context.Context) bool {
		return d.allDependents(ctx, shoots, func(name string) int32 { return sim.Dependents[name] })
	}); err != nil {
		return "", fmt.Errorf("not scaled up in time: %w", err)
	}
	if err := d.orderSeen(ctx, order, shoots, upLevels, 1); err != nil {
		return "", err
	}
	return "replicas restored level by level, annotations removed", nil
}

// kill kills a replica and checks that the others take over all its partitions and shoots.
func (d *Demo) kill(ctx context.Context, victim *sim.Replica) (string, error) {
	start := time.Now()
	victim.Kill()
	err := d.Until(ctx, LeaseDuration+15*time.Second, func(ctx context.Context) bool {
		held, probing := d.Totals(ctx)
		return held == sim.Partitions && probing == float64(d.Options.Shoots)
	})
	if err != nil {
		return "", fmt.Errorf("its shoots were not taken over in time: %w", err)
	}
	return fmt.Sprintf("every partition held and every shoot probed again %s after the kill (member lease %s); %s",
		time.Since(start).Round(100*time.Millisecond), LeaseDuration, d.shares(ctx)), nil
}

// comeBack restarts a replica under its name and checks that it takes back a share.
func (d *Demo) comeBack(ctx context.Context, r *sim.Replica) (string, error) {
	start := time.Now()
	if err := r.Restart(); err != nil {
		return "", err
	}
	err := d.Until(ctx, 60*time.Second, func(ctx context.Context) bool {
		held, probing := d.Totals(ctx)
		return held == sim.Partitions && probing == float64(d.Options.Shoots) && r.Sum(ctx, "dwd_probes_active", "") > 0
	})
	if err != nil {
		return "", fmt.Errorf("it did not take back its share in time: %w", err)
	}
	back := time.Since(start)
	// Every replica ready: the share is back where the ring puts it, so that the next step starts
	// from a settled group (a SIGTERM during the move measured the move, not the handover).
	if err := d.Until(ctx, 60*time.Second, func(ctx context.Context) bool { return sim.AllReady(ctx, d.Replicas) }); err != nil {
		return "", fmt.Errorf("the group did not settle with it back: %w", err)
	}
	return fmt.Sprintf("back after %s, every replica holding its share after %s; %s", back.Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond), d.shares(ctx)), nil
}

// Weed makes the etcd of the shoots unready, starts a crash-looping kube-apiserver in each, then lets
// etcd recover and checks that those pods are deleted and the healthy ones kept.
func (d *Demo) Weed(ctx context.Context, shoots []string) (string, error) {
	c := d.Seed.Env.Client
	for _, ns := range shoots {
		if err := d.Seed.SetServiceReady(ctx, ns, sim.EtcdService, false); err != nil {
			return "", err
		}
		if err := sim.CreatePod(ctx, c, ns, "kube-apiserver-crashing", "apiserver", "CrashLoopBackOff"); err != nil {
			return "", err
		}
	}
	start := time.Now()
	for _, ns := range shoots {
		if err := d.Seed.SetServiceReady(ctx, ns, sim.EtcdService, true); err != nil {
			return "", err
		}
	}
	err := d.Until(ctx, 30*time.Second, func(ctx context.Context) bool {
		for _, ns := range shoots {
			if !d.podGone(ctx, ns, "kube-apiserver-crashing") {
				return false
			}
		}
		return true
	})
	if err != nil {
		return "", fmt.Errorf("crash-looping pods not deleted in time: %w", err)
	}
	for _, ns := range shoots {
		if d.podGone(ctx, ns, "kube-apiserver-0") {
			return "", fmt.Errorf("the healthy kube-apiserver-0 of %s was deleted", ns)
		}
	}
	return fmt.Sprintf("%d crash-looping pods deleted %s after etcd turned ready; healthy pods kept",
		len(shoots), time.Since(start).Round(100*time.Millisecond)), nil
}

// scaling is one change of a dependent's replicas, in the order the API server made them.
type scaling struct {
	namespace, name string
	replicas        int32
}

// recordScaling watches the dependents of the shoots and records every change of their replicas.
func (d *Demo) recordScaling(ctx context.Context, shoots []string) (func() []scaling, func(), error) {
	cs, err := kubernetes.NewForConfig(d.Seed.Env.Config)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	var changes []scaling
	var watches []watch.Interface
	var wg sync.WaitGroup
	stop := func() { // ends the watches and waits for their readers
		for _, w := range watches {
			w.Stop()
		}
		wg.Wait()
	}
	for _, ns := range shoots {
		w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			stop()
			return nil, nil, err
		}
		watches = append(watches, w)
		wg.Go(func() {
			last := map[string]int32{}
			for e := range w.ResultChan() {
				dep, ok := e.Object.(*appsv1.Deployment)
				if !ok || dep.Spec.Replicas == nil {
					continue
				}
				if prev, seen := last[dep.Name]; seen && prev != *dep.Spec.Replicas {
					mu.Lock()
					changes = append(changes, scaling{namespace: dep.Namespace, name: dep.Name, replicas: *dep.Spec.Replicas})
					mu.Unlock()
				}
				last[dep.Name] = *dep.Spec.Replicas
			}
		})
	}
	return func() []scaling { mu.Lock(); defer mu.Unlock(); return slices.Clone(changes) }, stop, nil
}

// checkOrder checks, per shoot, that every dependent of a level reached the target (0, or at
// least min) before any of the next level did.
func checkOrder(changes []scaling, shoots []string, levels [][]string, min int32) error {
	for _, ns := range shoots {
		reached := reachedAt(changes, ns, min)
		for l := 0; l+1 < len(levels); l++ {
			for _, a := range levels[l] {
				for _, b := range levels[l+1] {
					ia, okA := reached[a]
					ib, okB := reached[b]
					if !okA || !okB || ia > ib {
						return fmt.Errorf("%s: %s must be scaled before %s (seen: %s)", ns, a, b, describe(changes, ns))
					}
				}
			}
		}
	}
	return nil
}

// reachedAt returns, per dependent of the shoot, the index of the first change that brought it to the
// target (0, or at least min).
func reachedAt(changes []scaling, ns string, min int32) map[string]int {
	reached := map[string]int{}
	for i, c := range changes {
		hit := (min == 0 && c.replicas == 0) || (min > 0 && c.replicas >= min)
		if _, done := reached[c.name]; c.namespace == ns && hit && !done {
			reached[c.name] = i
		}
	}
	return reached
}

// orderSeen checks the order of the changes once the watch has shown every dependent of every shoot
// at the target: the watch delivers the changes a little after a read shows their result.
func (d *Demo) orderSeen(ctx context.Context, order func() []scaling, shoots []string, levels [][]string, min int32) error {
	_ = d.Until(ctx, watchDelivery, func(context.Context) bool {
		changes := order()
		for _, ns := range shoots {
			if len(reachedAt(changes, ns, min)) < len(sim.Dependents) {
				return false
			}
		}
		return true
	})
	return checkOrder(order(), shoots, levels, min)
}

// watchDelivery bounds how long after a read shows a change the demo waits for its watch event.
const watchDelivery = 10 * time.Second

func describe(changes []scaling, ns string) string {
	var parts []string
	for _, c := range changes {
		if c.namespace == ns {
			parts = append(parts, fmt.Sprintf("%s→%d", c.name, c.replicas))
		}
	}
	return strings.Join(parts, ", ")
}
