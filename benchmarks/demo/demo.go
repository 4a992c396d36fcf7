package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// The demo's timings: short enough to watch, the protocol's order kept (retry < renew < lease). Its
// prober config is sim.ProberConfig, whose probe interval is ProbeInterval.
const (
	LeaseDuration = 8 * time.Second
	renewDeadline = 5 * time.Second
	retryPeriod   = time.Second
	ProbeInterval = 2 * time.Second
)

// Options size the demo (dwd-sim demo's flags).
type Options struct {
	// Shoots on the seed, Nodes per shoot, and the dwd Replicas.
	Shoots, Nodes, Replicas int
	// Dwd is the dwd binary (sim.FindDwd when empty); Dir receives the configs and the replica logs (a
	// new temporary folder when empty).
	Dwd, Dir string
	// LogLevel is the replicas' --zap-log-level; info when empty.
	LogLevel string
}

// Overlay is the deploy/ overlay whose RBAC the demo's replicas run under.
const Overlay = "overlays/sharded"

// Run sets the stage, with the replicas running under the RBAC of Overlay, plays the script with the
// live view, prints the summary to out and fails when a step did not do what it should.
func Run(ctx context.Context, out io.Writer, o Options) error {
	g, err := sim.OverlayGrants(Overlay)
	if err != nil {
		return err
	}
	d, err := SetUp(ctx, &sim.LockedWriter{W: out}, o, g)
	if d != nil {
		defer d.TearDown()
	}
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// Run plays the script with the live view and prints the summary.
func (d *Demo) Run(ctx context.Context) error {
	stop := d.watch(ctx)
	d.play(ctx)
	stop()
	return d.Summary()
}

// SetUp starts the seed, applies the RBAC of g, creates the shoots and writes the replicas' configs;
// TearDown stops what it started, also when it fails half-way and returns a Demo with the error.
func SetUp(ctx context.Context, out io.Writer, o Options, g sim.Grants) (*Demo, error) {
	dwd, err := sim.FindDwd(o.Dwd)
	if err != nil {
		return nil, err
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "dwd-demo-"); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(out, "Starting a local seed (kube-apiserver and etcd) in %s\n", o.Dir)
	seed, err := sim.StartSeed(ctx, o.Dir)
	if err != nil {
		return nil, err
	}
	d := &Demo{Out: out, Seed: seed, Options: o}
	id, err := seed.Grant(ctx, g, "replicas.kubeconfig")
	if err != nil {
		return d, err
	}
	d.kubeconfig, d.Namespace = id.Kubeconfig, id.Namespace
	fmt.Fprintf(out, "The replicas run as %s (impersonated), with exactly the permissions of %s (%d rules)\n",
		id.User, g.Source, sim.CountRules(g.Objects))
	start := time.Now()
	if err := seed.CreateShoots(ctx, 0, o.Shoots, o.Nodes, sim.ProgressPrinter(out, "simulated shoots")); err != nil {
		return d, err
	}
	fmt.Fprintf(out, " (%s)\n", time.Since(start).Round(100*time.Millisecond))
	d.Set, err = d.replicaSet(dwd)
	return d, err
}

// replicaSet writes the configs and returns the set the replicas start from.
func (d *Demo) replicaSet(dwd string) (*sim.ReplicaSet, error) {
	configs, err := sim.WriteConfigs(d.Options.Dir, "prober.yaml", sim.ProberConfig, sim.WeederConfig)
	if err != nil {
		return nil, err
	}
	// The replicas are no Pods of a StatefulSet, so a graceful stop is a leave for good: it hands the
	// share over at once. They look for a leader of the original's mode in their own namespace, as the
	// base StatefulSet's do (its RBAC reads no Lease elsewhere).
	return &sim.ReplicaSet{Dwd: dwd, Dir: d.Options.Dir, Args: append(configs,
		"--kubeconfig="+d.kubeconfig,
		"--shard-namespace="+d.Namespace, "--leader-election-namespace="+d.Namespace, "--kube-api-qps=50", "--kube-api-burst=100",
		"--member-lease-duration="+LeaseDuration.String(), "--member-renew-deadline="+renewDeadline.String(),
		"--member-retry-period="+retryPeriod.String(), "--leave-mode=handover",
		"--zap-log-level="+cmp.Or(d.Options.LogLevel, "info"),
	)}, nil
}
