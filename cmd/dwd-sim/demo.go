package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// The demo's timings: short enough to watch, the protocol's order kept (retry < renew < lease).
const (
	demoLeaseDuration = 8 * time.Second
	demoRenewDeadline = 5 * time.Second
	demoRetryPeriod   = time.Second
	demoProbeInterval = 2 * time.Second
)

// The demo's configs are the simulated seed's.
const (
	demoProberConfig = sim.ProberConfig
	demoWeederConfig = sim.WeederConfig
)

// demoOptions are the demo's flags.
type demoOptions struct {
	shoots, nodes, replicas int
	dwd, dir                string
	// logLevel is the replicas' --zap-log-level.
	logLevel string
}

func newDemoCommand() *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run three dwd replicas against simulated shoots through a scripted outage",
		Long: `Starts a local seed with simulated shoots and three dwd replicas as separate processes, shows
what each replica does, and plays a script: a meltdown in some shoots (scale-down in level order), their
recovery (scale-up), one replica killed (its shoots taken over), its return, an etcd endpoint that
recovers (crash-looping pods weeded), and one replica stopped gracefully (its shoots handed over at
once). The replicas run with exactly the permissions of deploy/overlays/sharded: the seed applies its
ServiceAccount, roles and bindings, and the replicas' kubeconfig impersonates that ServiceAccount. It
ends with a summary and exits 1 if a step did not do what it should.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			quietLogs()
			g, err := sim.OverlayGrants(demoOverlay)
			if err != nil {
				return err
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), o, g)
		},
	}
	cmd.Flags().IntVar(&o.shoots, "shoots", 300, "Number of simulated shoots.")
	cmd.Flags().IntVar(&o.nodes, "nodes", 3, "Nodes per shoot.")
	cmd.Flags().IntVar(&o.replicas, "replicas", 3, "Number of dwd replicas.")
	cmd.Flags().StringVar(&o.dwd, "dwd", "", "Path of the dwd binary (default: dwd next to this binary).")
	cmd.Flags().StringVar(&o.dir, "dir", "", "Folder for configs and replica logs (default: a new temporary folder).")
	cmd.Flags().StringVar(&o.logLevel, "replica-log-level", "info", "The replicas' --zap-log-level (debug, info, error).")
	return cmd
}

// demoOverlay is the deploy/ overlay whose RBAC the demo's replicas run under.
const demoOverlay = "overlays/sharded"

// runDemo sets the stage, with the replicas running under the RBAC of g, plays the script and prints
// the summary.
func runDemo(ctx context.Context, out io.Writer, o demoOptions, g sim.Grants) error {
	d, err := setUp(ctx, &sim.LockedWriter{W: out}, o, g)
	if d != nil {
		defer d.tearDown()
	}
	if err != nil {
		return err
	}
	return d.run(ctx)
}

// run plays the script with the live view and prints the summary.
func (d *demo) run(ctx context.Context) error {
	stop := d.watch(ctx)
	d.play(ctx)
	stop()
	return d.summary()
}

// setUp starts the seed, applies the RBAC of g, creates the shoots and writes the replicas' configs.
func setUp(ctx context.Context, out io.Writer, o demoOptions, g sim.Grants) (*demo, error) {
	dwd, err := sim.FindDwd(o.dwd)
	if err != nil {
		return nil, err
	}
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "dwd-demo-"); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(out, "Starting a local seed (kube-apiserver and etcd) in %s\n", o.dir)
	seed, err := sim.StartSeed(ctx, o.dir)
	if err != nil {
		return nil, err
	}
	d := &demo{out: out, seed: seed, opts: o}
	id, err := seed.Grant(ctx, g, "replicas.kubeconfig")
	if err != nil {
		return d, err
	}
	d.kubeconfig, d.namespace = id.Kubeconfig, id.Namespace
	fmt.Fprintf(out, "The replicas run as %s (impersonated), with exactly the permissions of %s (%d rules)\n",
		id.User, g.Source, sim.CountRules(g.Objects))
	start := time.Now()
	if err := seed.CreateShoots(ctx, 0, o.shoots, o.nodes, sim.ProgressPrinter(out, "simulated shoots")); err != nil {
		return d, err
	}
	fmt.Fprintf(out, " (%s)\n", time.Since(start).Round(100*time.Millisecond))
	d.rs, err = d.replicaSet(dwd)
	return d, err
}

// replicaSet writes the configs and returns the set the replicas start from.
func (d *demo) replicaSet(dwd string) (*sim.ReplicaSet, error) {
	prober := filepath.Join(d.opts.dir, "prober.yaml")
	weeder := filepath.Join(d.opts.dir, "weeder.yaml")
	if err := os.WriteFile(prober, []byte(demoProberConfig), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(weeder, []byte(demoWeederConfig), 0o644); err != nil {
		return nil, err
	}
	// The replicas are no Pods of a StatefulSet, so a graceful stop is a leave for good: it hands the
	// share over at once. They look for a leader of the original's mode in their own namespace, as the
	// base StatefulSet's do (its RBAC reads no Lease elsewhere).
	return &sim.ReplicaSet{Dwd: dwd, Dir: d.opts.dir, Args: []string{
		"--kubeconfig=" + d.kubeconfig, "--prober-config=" + prober, "--weeder-config=" + weeder,
		"--shard-namespace=" + d.namespace, "--leader-election-namespace=" + d.namespace, "--kube-api-qps=50", "--kube-api-burst=100",
		"--member-lease-duration=" + demoLeaseDuration.String(), "--member-renew-deadline=" + demoRenewDeadline.String(),
		"--member-retry-period=" + demoRetryPeriod.String(), "--leave-mode=handover",
		"--zap-log-level=" + cmp.Or(d.opts.logLevel, "info"),
	}}, nil
}
