package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// seedScenarios are the scenarios on the seed's API server and the shoots' dependents.
var seedScenarios = []scenario{
	{name: "kube-apiserver stopped and started again", outage: true, run: apiServerOutage},
	{name: "rolling restart during a meltdown", run: rollingMeltdown},
}

// apiServerOutage stops the kube-apiserver for a while and starts it again on the same etcd: nothing
// may be scaled meanwhile, no replica may exit, and afterwards every partition is held by whom held
// it before (none stolen from a member that was only cut off like everyone else).
func apiServerOutage(ctx context.Context, c *cluster, _ *rand.Rand, sz sizes) ([]string, error) {
	holders, err := c.partitionHolders(ctx)
	if err != nil {
		return nil, err
	}
	before := c.scaleOperations(ctx)
	if err := c.seed.Env.StopAPIServer(c.dir); err != nil {
		return nil, err
	}
	errs := []error{hold(ctx, sz.apiOutage)}
	during := c.scaleOperations(ctx)
	if err := c.seed.Env.StartAPIServer(); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	if !maps.Equal(before, during) {
		errs = append(errs, fmt.Errorf("scale operations while the API server was down: before %v, at its start %v", before, during))
	}
	if err := c.converge(ctx, time.Now(), convergeTimeout); err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("after the API server came back: %w", err))...)
	}
	after, err := c.partitionHolders(ctx)
	errs = append(errs, err)
	if moved := changedHolders(holders, after); len(moved) > 0 {
		errs = append(errs, fmt.Errorf("%d partitions changed holder across the outage, e.g. %s", len(moved), moved[0]))
	}
	return nil, errors.Join(errs...)
}

// scaleOperations sums dwd_scale_operations_total per replica, whatever the result.
func (c *cluster) scaleOperations(ctx context.Context) map[string]float64 {
	return sim.PerReplica(ctx, c.replicas, "dwd_scale_operations_total", "")
}

// partitionHolders reads the holder of every partition lease of the group.
func (c *cluster) partitionHolders(ctx context.Context) (map[string]string, error) {
	leases := &coordinationv1.LeaseList{}
	if err := c.seed.Env.Client.List(ctx, leases, client.InNamespace(shardNamespace)); err != nil {
		return nil, err
	}
	holders := map[string]string{}
	for _, l := range leases.Items {
		if strings.Contains(l.Name, "-partition-") && l.Spec.HolderIdentity != nil {
			holders[l.Name] = *l.Spec.HolderIdentity
		}
	}
	return holders, nil
}

// changedHolders describes the partitions whose holder differs.
func changedHolders(before, after map[string]string) []string {
	var moved []string
	for name, h := range before {
		if after[name] != h {
			moved = append(moved, fmt.Sprintf("%s: %q → %q", name, h, after[name]))
		}
	}
	slices.Sort(moved)
	return moved
}

// The waits of the meltdown: for the scale-down after the leases expired, and for the scale-up.
const (
	scaleDownTimeout = 60 * time.Second
	scaleUpTimeout   = 90 * time.Second
)

// rollingMeltdown melts some shoots and, while their leases expire, restarts every replica in turn
// (SIGTERM, a new process, ready, the next): every melted dependent must be scaled down and, after the
// recovery, up again, each exactly once (the round checks that, see scalings). One of them gets a
// damaged replicas annotation ("abc") while it is down: it is restored to the default replicas with an
// InvalidAnnotation Event.
func rollingMeltdown(ctx context.Context, c *cluster, rng *rand.Rand, sz sizes) ([]string, error) {
	melted := c.randomShoots(rng, sz.melt)
	start := time.Now()
	defer c.recover(melted) // also when the scenario fails half-way
	expired, err := c.melt(melted)
	if err != nil {
		return melted, err
	}
	// The rollout starts a few seconds before the first scale-downs are due, and overlaps them.
	if err := hold(ctx, time.Until(expired)-4*time.Second); err != nil {
		return melted, err
	}
	if err := c.rollOut(ctx); err != nil {
		return melted, err
	}
	if err := c.awaitDependents(ctx, melted, func(string) int32 { return 0 }, scaleDownTimeout); err != nil {
		return melted, fmt.Errorf("not scaled down: %w", err)
	}
	damaged := melted[0]
	if err := c.annotate(ctx, damaged, "kube-controller-manager", scaler.ReplicasAnnotation, "abc"); err != nil {
		return melted, err
	}
	if err := c.recover(melted); err != nil {
		return melted, err
	}
	if err := c.awaitDependents(ctx, melted, func(name string) int32 { return sim.Dependents[name] }, scaleUpTimeout); err != nil {
		return melted, fmt.Errorf("not scaled up: %w", err)
	}
	c.logf("rolling restart during a meltdown of %d shoots: scaled down and up again %s after the meltdown began",
		len(melted), time.Since(start).Round(100*time.Millisecond))
	return melted, c.expectEvent(ctx, damaged, scaler.EventInvalidAnnotation)
}

// randomShoots returns n shoots at random.
func (c *cluster) randomShoots(rng *rand.Rand, n int) []string {
	names := slices.Clone(c.shoots)
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	return names[:min(n, len(names))]
}

// recover lets the kubelets of the shoots renew their leases again.
func (c *cluster) recover(shoots []string) error {
	var errs []error
	for _, ns := range shoots {
		errs = append(errs, c.seed.Shoots.SetScenario(ns, sim.Scenario{}))
	}
	return errors.Join(errs...)
}

// melt stops the kubelets of the shoots and returns when the last of them will have expired leases.
func (c *cluster) melt(shoots []string) (time.Time, error) {
	var expired time.Time
	for _, ns := range shoots {
		if err := c.seed.Shoots.SetScenario(ns, sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 1}); err != nil {
			return expired, err
		}
		if at, _ := c.seed.Shoots.ExpiredSince(ns, expiredAge, expiredFraction); at.After(expired) {
			expired = at
		}
	}
	return expired, nil
}

// rollOut restarts the replicas from the highest ordinal down, each once the one before is ready.
func (c *cluster) rollOut(ctx context.Context) error {
	for i := len(c.replicas) - 1; i >= 0; i-- {
		r := c.replicas[i]
		if !r.Terminate(stopTimeout) {
			return fmt.Errorf("%s did not exit within %s of SIGTERM", r.Name, stopTimeout)
		}
		if err := c.restart(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// awaitDependents waits until every dependent of every shoot has want(name) replicas.
func (c *cluster) awaitDependents(ctx context.Context, shoots []string, want func(name string) int32, timeout time.Duration) error {
	var wrong []string
	err := until(ctx, timeout, func(ctx context.Context) bool {
		wrong = wrong[:0]
		for _, ns := range shoots {
			for name := range sim.Dependents {
				dep := &appsv1.Deployment{}
				err := c.seed.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep)
				if err != nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != want(name) {
					wrong = append(wrong, ns+"/"+name)
				}
			}
		}
		return len(wrong) == 0
	})
	if err != nil {
		return fmt.Errorf("%d dependents not there within %s, e.g. %v: %w", len(wrong), timeout, wrong[:min(3, len(wrong))], err)
	}
	return nil
}

// annotate sets an annotation of a Deployment with a merge patch, a write of the test's own.
func (c *cluster) annotate(ctx context.Context, ns, name, key, value string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	dep := &appsv1.Deployment{}
	dep.Namespace, dep.Name = ns, name
	if err := c.seed.Env.Client.Patch(ctx, dep, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	c.own[ns+"/"+name]++
	return nil
}

// expectEvent checks that an Event with the reason was recorded in the namespace.
func (c *cluster) expectEvent(ctx context.Context, ns, reason string) error {
	events := &eventsv1.EventList{}
	if err := c.seed.Env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
		return err
	}
	var reasons []string
	for _, e := range events.Items {
		if e.Reason == reason {
			return nil
		}
		reasons = append(reasons, e.Reason)
	}
	return fmt.Errorf("no %s Event in %s (there are: %v)", reason, ns, reasons)
}
