package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// The group's timings: short so that scenarios are quick, in the protocol's order
// (retry < renew deadline < lease duration, the deadline below the duration by 2 s and 20%). The
// lease duration leaves a fence (D − R) / 2 = 2 s to stop the work: at 6 s (1 s), a replica of both
// roles, whose two members fence at once when a SIGCONT wakes it past its lease, overran it now and
// then under the race detector on 2 cores and exited (production's is 2.5 s).
const (
	leaseDuration = 8 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = time.Second
	probeInterval = 2 * time.Second
	// partitions is a group's partition count: the product's default.
	partitions = 887
	// allPartitions are the partitions of the prober's group and of the weeder's: each replica runs
	// both roles, a member of both groups.
	allPartitions = 2 * partitions
	// replicaCount is how many replicas the group runs.
	replicaCount = 3
	// nodesPerShoot is each simulated shoot's nodes.
	nodesPerShoot = 3
	// shardNamespace holds the group's Leases.
	shardNamespace = "garden"
)

// proberConfig is the replicas' prober config: the demo's, with the shortest grace period the
// product accepts (16s at least), so that a meltdown is decided 15 s after the kubelets stop.
var proberConfig = sim.ProberConfigWith(2*time.Second, 10*time.Second, 20*time.Second, 2*time.Second)

// The grace period's consequences: when a melted shoot's leases count as expired (0.75 × 20 s) and
// the fraction that decides.
const (
	expiredAge      = 15 * time.Second
	expiredFraction = 0.6
)

// weederConfig is the simulated seed's, with a shorter watch.
var weederConfig = strings.Replace(sim.WeederConfig, "watchDuration: 30s", "watchDuration: 10s", 1)

// cluster is the seed, its shoots and the replicas every scenario acts on.
type cluster struct {
	dir    string
	dwd    string
	seed   *sim.Seed
	faults *sim.FaultServer
	// shoots are the simulated shoots' namespaces.
	shoots []string
	// set starts the replicas, each through a proxy of its own, with an audit log per process when
	// the binary writes them; replicas are dwd-0, dwd-1 and dwd-2.
	set      *sim.ReplicaSet
	replicas []*sim.Replica
	// common are the flags the replicas run with, unless a scenario gives one others.
	common []string
	// own counts the test's own writes to Deployments in the round that bump their generation (an
	// annotation it damages), by namespace/name: no writes of dwd (see scalings).
	own   map[string]int
	logf  func(format string, args ...any)
	stats *stats
}

// startCluster starts the seed with n shoots and the replicas, and waits until they converged.
func startCluster(ctx context.Context, dir, dwd string, n int, logf func(string, ...any)) (*cluster, error) {
	seed, err := sim.StartSeed(ctx, dir)
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, dwd: dwd, seed: seed, logf: logf, stats: newStats()}
	if err := c.setUp(ctx, n); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// setUp creates the shoots (their kubeconfigs through the fault server), the configs and the
// replicas.
func (c *cluster) setUp(ctx context.Context, n int) error {
	var err error
	if c.faults, err = sim.NewFaultServer(c.seed.Shoots); err != nil {
		return err
	}
	if err := c.seed.CreateNamespace(ctx, shardNamespace); err != nil {
		return err
	}
	if err := c.seed.CreateShoots(ctx, 0, n, nodesPerShoot, nil); err != nil {
		return err
	}
	for i := range n {
		ns := sim.ShootName(i)
		c.shoots = append(c.shoots, ns)
		if err := c.routeThroughFaults(ctx, ns); err != nil {
			return err
		}
	}
	if err := c.writeConfigs(ctx); err != nil {
		return err
	}
	for i := range replicaCount {
		r, err := c.set.Start(fmt.Sprintf("dwd-%d", i))
		if err != nil {
			return err
		}
		c.replicas = append(c.replicas, r)
	}
	return c.converge(ctx, time.Now(), 2*time.Minute)
}

// routeThroughFaults points a shoot's kubeconfig Secret at the fault server.
func (c *cluster) routeThroughFaults(ctx context.Context, ns string) error {
	kubeconfig, err := c.faults.Kubeconfig(ns)
	if err != nil {
		return err
	}
	return c.setKubeconfig(ctx, ns, map[string][]byte{"kubeconfig": kubeconfig})
}

// setKubeconfig replaces the data of a shoot's kubeconfig Secret.
func (c *cluster) setKubeconfig(ctx context.Context, ns string, data map[string][]byte) error {
	secret := &corev1.Secret{}
	if err := c.seed.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sim.KubeconfigSecretName}, secret); err != nil {
		return err
	}
	secret.Data = data
	return c.seed.Env.Client.Update(ctx, secret)
}

// writeConfigs writes the configs and makes the set of replicas with their common flags; the
// binary's help says whether it has --audit-log.
func (c *cluster) writeConfigs(ctx context.Context) error {
	configs, err := sim.WriteConfigs(c.dir, "prober.yaml", proberConfig, weederConfig)
	if err != nil {
		return err
	}
	help, err := exec.CommandContext(ctx, c.dwd, "run", "--help").CombinedOutput()
	if err != nil {
		return fmt.Errorf("dwd run --help: %w: %s", err, help)
	}
	c.common = append(configs,
		"--shard-namespace="+shardNamespace, "--partitions="+strconv.Itoa(partitions),
		"--kube-api-qps=100", "--kube-api-burst=200", "--probe-workers=8",
		"--member-lease-duration="+leaseDuration.String(), "--member-renew-deadline="+renewDeadline.String(),
		"--member-retry-period="+retryPeriod.String(), "--leave-mode=handover",
		"--zap-log-level=info", "--zap-time-encoding=rfc3339nano")
	if bytes.Contains(help, []byte("--leader-election-namespace")) {
		c.common = append(c.common, "--leader-election-namespace="+shardNamespace)
	}
	c.set = &sim.ReplicaSet{Dwd: c.dwd, Dir: c.dir, Args: c.common, ProxyTo: c.seed,
		Audit: bytes.Contains(help, []byte("--audit-log"))}
	return nil
}

// stop ends the replicas and the seed.
func (c *cluster) stop() {
	sim.TerminateRunning(c.replicas, 10*time.Second)
	if c.set != nil {
		c.set.Close()
	}
	if c.faults != nil {
		_ = c.faults.Close()
	}
	if err := c.seed.Stop(); err != nil {
		c.logf("stopping the seed: %v", err)
	}
}

// totals sums the partitions held and the shoots probed over the running replicas.
func (c *cluster) totals(ctx context.Context) (held, probing float64) {
	for _, r := range c.replicas {
		m := r.Metrics(ctx, "dwd_sharding_partitions_held", "dwd_probes_active")
		held += dwdproc.Sum(m, "dwd_sharding_partitions_held")
		probing += dwdproc.Sum(m, "dwd_probes_active")
	}
	return held, probing
}

// converge waits, without restarting anything, until every replica is ready, every partition held,
// every shoot has a probe, and every shoot the test did not break was probed after since.
func (c *cluster) converge(ctx context.Context, since time.Time, timeout time.Duration) error {
	var held, probing float64
	var unprobed []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, r := range c.replicas {
			if !r.Running() {
				return false, fmt.Errorf("%s exited", r.Name)
			}
			if !r.Ready(ctx) {
				return false, nil
			}
		}
		held, probing = c.totals(ctx)
		unprobed = c.unprobedSince(since)
		return held == allPartitions && probing == float64(len(c.shoots)) && len(unprobed) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("not converged within %s (%.0f of %d partitions held, %.0f of %d shoots with a probe, not probed since: %v): %w",
			timeout, held, allPartitions, probing, len(c.shoots), unprobed, err)
	}
	return nil
}

// unprobedSince returns the shoots whose last probe (a lease list) was before t.
func (c *cluster) unprobedSince(t time.Time) []string {
	stats := c.seed.Shoots.ProbeStats()
	var names []string
	for _, ns := range c.shoots {
		if stats[ns].Last.Before(t) {
			names = append(names, ns)
		}
	}
	return names
}

// until polls cond every 200ms until it holds or timeout passes.
func until(ctx context.Context, timeout time.Duration, cond func(context.Context) bool) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
}

// hold lets d pass unless ctx ends first: a scenario's fault that must last that long.
func hold(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
