package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/leases"

	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"
)

// sizes are the scenarios' parameters that differ between the short suite and the soak.
type sizes struct {
	// killRounds is how many replicas the kill scenario kills in a row.
	killRounds int
	// apiOutage is how long the kube-apiserver stays down.
	apiOutage time.Duration
	// melt is how many shoots melt during the rolling restart.
	melt int
	// hugeLeases is the extra leases of the huge-list shoot.
	hugeLeases int
	// brownout is how long each of the three brownouts cuts every replica off, brownoutGap the time
	// between two: all three fences must fall within the flap window.
	brownout, brownoutGap time.Duration
}

// scenario is one kind of fault and its own checks; run returns the shoots it melted on purpose
// (their scale-downs are no spurious ones).
type scenario struct {
	name string
	// outage says it stops the API server: every member fences, and partitions stay unheld for as long.
	outage bool
	run    func(ctx context.Context, c *cluster, rng *rand.Rand, sz sizes) (melted []string, err error)
}

// convergeTimeout bounds the wait for convergence after a scenario: a member lease (a replica that
// rejoins waits out its own lease by observation), the return of a fenced member, and probes; and a
// step-down: a replica that fenced leases.FlapFences times within the flap window (two network cuts of
// it in a row, as the soak may draw) sits out that window before it joins again, by design.
const convergeTimeout = leases.FlapWindowDurations*leaseDuration + leaseDuration*3 + 30*time.Second

// round runs one scenario and the checks every scenario is followed by: convergence without a
// restart, no spurious scale-down (and every dependent of a shoot it melted scaled down and up
// exactly once, see scalings), no panic in any log, and the ownership audit. It records what it
// found in c.stats and returns every failed check.
func (c *cluster) round(ctx context.Context, sc scenario, rng *rand.Rand, sz sizes) error {
	start := time.Now()
	before, err := c.readDependents(ctx)
	if err != nil {
		err = fmt.Errorf("before the scenario: %w", err)
		c.stats.record(sc, start, time.Now(), err, 0, 0, c.stats.panics, auditOutcome{})
		return err
	}
	c.own = map[string]int{}
	unheld := c.watchUnheld(ctx)
	melted, err := sc.run(ctx, c, rng, sz)
	errs := []error{err}
	if err != nil && len(melted) > 0 {
		// A scenario cut short leaves its melted shoots' scale-ups to come: let them land in this
		// round, which has failed already, not count as spurious in the next.
		errs = append(errs, c.awaitDependents(ctx, melted, func(name string) int32 { return sim.Dependents[name] }, scaleUpTimeout))
	}
	if err := c.converge(ctx, time.Now(), convergeTimeout); err != nil {
		errs = append(errs, fmt.Errorf("after the scenario: %w", err))
	}
	longest := unheld.stop()
	after, err := c.readDependents(ctx)
	errs = append(errs, err)
	var bad []string
	if err == nil {
		var wrong []error
		bad, wrong = scalings(before, after, set(melted), c.own)
		errs = append(errs, wrong...)
		for _, s := range bad {
			errs = append(errs, fmt.Errorf("spurious scaling of %s", s))
		}
	}
	panics, err := c.panicLines()
	errs = append(errs, err)
	if n := len(panics) - c.stats.panics; n > 0 {
		errs = append(errs, fmt.Errorf("%d new panic lines in the replica logs, the first: %s", n, panics[c.stats.panics]))
	}
	audit, err := c.checkAudit()
	errs = append(errs, err, audit.problem)
	c.stats.record(sc, start, time.Now(), errors.Join(errs...), longest, len(bad), len(panics), audit)
	return errors.Join(errs...)
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// pick returns a random running replica.
func (c *cluster) pick(rng *rand.Rand) *sim.Replica {
	return c.replicas[rng.IntN(len(c.replicas))]
}

// others returns the replicas other than r.
func (c *cluster) others(r *sim.Replica) []*sim.Replica {
	var out []*sim.Replica
	for _, o := range c.replicas {
		if o != r {
			out = append(out, o)
		}
	}
	return out
}

// heldBy sums the partitions the replicas hold, by their metrics.
func heldBy(ctx context.Context, replicas []*sim.Replica) float64 {
	held := 0.0
	for _, r := range replicas {
		held += r.Sum(ctx, "dwd_sharding_partitions_held", "")
	}
	return held
}

// held reads the partitions r holds; false when its metrics did not answer (a busy or stopped
// process), which is no 0.
func held(ctx context.Context, r *sim.Replica) (float64, bool) {
	m := r.Metrics(ctx, "dwd_sharding_partitions_held")
	return dwdproc.Sum(m, "dwd_sharding_partitions_held"), m != nil
}

// awaitTakeover waits until the replicas hold every partition, and returns how long it took.
func awaitTakeover(ctx context.Context, replicas []*sim.Replica, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	err := until(ctx, timeout, func(ctx context.Context) bool { return heldBy(ctx, replicas) == allPartitions })
	if err != nil {
		return 0, fmt.Errorf("the others held %.0f of %d partitions after %s: %w", heldBy(ctx, replicas), allPartitions, timeout, err)
	}
	return time.Since(start), nil
}

// awaitReady waits until r's process is ready.
func awaitReady(ctx context.Context, r *sim.Replica, timeout time.Duration) error {
	if err := until(ctx, timeout, r.Ready); err != nil {
		return fmt.Errorf("%s not ready %s after its start: %w", r.Name, timeout, err)
	}
	return nil
}
