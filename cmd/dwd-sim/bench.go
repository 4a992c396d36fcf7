package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks"
)

// benchLong is the help of the bench command: the scenarios it runs.
const benchLong = `Starts a local seed with simulated shoots and runs dwd replicas as separate processes through
the load scenarios:

  steady     every shoot healthy, at each number of shoots × replicas, for --duration each
  handover   a replica leaves gracefully, joins, and is killed (-9), --repeats times each
  meltdown   the node leases of --meltdown-shoots shoots expire at once, --meltdowns times

and the fault scenarios, which run only when named:

  mass-meltdown           its three parts:
  mass-meltdown-original  --mass-meltdown-original-shoots shoots melt at once on one replica with the
                          original's client limits (qps 5, burst 10)
  mass-meltdown-recover   --mass-meltdown-melt of --mass-meltdown-seed shoots melt and recover, on
                          each of --mass-meltdown-replicas, with Gardener's limits and prober config
  mass-meltdown-all       every shoot of the seed (the largest --shoots) melts, on the most --replicas
  lies                    every shoot's API server lies in turn: a stale watch cache, a slow body,
                          node clocks behind, a server clock ahead, huge lease lists on a few shoots

and the restart scenarios, which run only when named, at the largest --shoots and --replicas:

  rolling  every replica restarts in turn as a StatefulSet's rolling update does (from the highest
           ordinal down: SIGTERM, exit, a new process under the same name, ready, the next one),
           with --leave-mode=return
  outage   every replica reaches the seed's API server through its own loopback proxy, and all are
           cut at once for --outage-duration

and the sizing scenario, which runs only when named, at the largest --shoots:

  roles    one replica of each role alone (dwd run with only that role's config) over every shoot,
           measured as a steady run once ready: RSS, heap and CPU per role

and the verdict scenarios, which run only when named, at each prober profile of --profile (default:
the bench's, at --probe-interval; gardener: probeInterval 30s, grace 40s, probeTimeout 30s, qps 20,
burst 100):

  blip       --blip-melt of --blip-seed shoots lose their kubelets for --blip-outage (long enough to
             be found), then renew again, on each of --blip-replicas: late scale-down writes, shoots
             left at 0, restore times
  detection  --detection-rounds rounds of --detection-shoots shoots owned by one replica melt at T0,
             per case of --detection-cases (steady, its owner killed at T0, a graceful handover at
             T0+10s, a Date header 30s ahead, 70 % melted with the owner killed), on
             --detection-replicas: seconds to the first scale-down write, and from the
             machine-controller-manager and cluster-autoscaler writes to kube-controller-manager's

Scenarios run in the order of the shoots they need, so that the seed only grows. It writes
<out>/<name>.json, <name>.md (with the baseline's figures in brackets, when there is one) and
<name>.png (probes/s and CPU per replica against replica count, when steady ran).`

func newBenchCommand() *cobra.Command {
	o := benchmarks.Options{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive dwd replicas against simulated shoots and record the figures",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			quietLogs()
			return benchmarks.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	addBenchFlags(f, &o)
	addFaultFlags(f, &o)
	addVerdictFlags(f, &o)
	return cmd
}

// addBenchFlags adds the flags of the results, the seed, the default scenarios and the processes.
func addBenchFlags(f *pflag.FlagSet, o *benchmarks.Options) {
	f.StringVar(&o.Name, "name", "latest", "Name of the result files.")
	f.StringVar(&o.Out, "out", "benchmarks/results", "Folder of the result files.")
	f.StringVar(&o.Baseline, "baseline", "benchmarks/results/baseline.json", "Result to compare with in the Markdown table (skipped when missing).")
	f.StringSliceVar(&o.Scenarios, "scenarios", benchmarks.DefaultScenarios(), "Scenarios to run: "+strings.Join(benchmarks.Scenarios, ", ")+".")
	f.IntSliceVar(&o.Shoots, "shoots", []int{1000, 5000}, "Numbers of shoots of the steady scenario; the largest is used for the others.")
	f.IntSliceVar(&o.Replicas, "replicas", []int{1, 3}, "Numbers of replicas of the steady scenario; the largest is used for the others.")
	f.IntVar(&o.Nodes, "nodes", 3, "Nodes per shoot.")
	f.IntVar(&o.NodeImages, "node-images", 0, "Container images each Node lists in its status (a real node lists those it pulled).")
	f.DurationVar(&o.Duration, "duration", 3*time.Minute, "How long each steady run is measured.")
	f.DurationVar(&o.Interval, "probe-interval", 10*time.Second, "The prober's probeInterval.")
	f.IntVar(&o.ProbeWorkers, "probe-workers", 0, "Each replica's --probe-workers (0: no bound but the shoots).")
	f.IntVar(&o.Repeats, "repeats", 10, "How often each handover event is played.")
	f.IntVar(&o.Meltdowns, "meltdowns", 3, "How many meltdowns are played.")
	f.IntVar(&o.MeltdownShoots, "meltdown-shoots", 20, "Shoots whose leases expire in each meltdown.")
	f.StringVar(&o.Dwd, "dwd", "", "Path of the dwd binary (default: dwd next to this binary).")
	f.StringVar(&o.Dir, "dir", "", "Folder for configs and replica logs (default: a new temporary folder).")
	f.BoolVar(&o.Pprof, "pprof", false, "Give every replica a pprof endpoint; its address is in <dir>/<replica>.pprof.")
	f.StringVar(&o.CacheSharding, "cache-sharding", "", "Every replica's --cache-sharding: server, client or off (default: dwd's).")
	f.BoolVar(&o.WithoutShardSelectors, "without-shard-selectors", false, "Run the seed's kube-apiserver with the feature gate ShardedListAndWatch off, so that it ignores shard selectors.")
}

// addFaultFlags adds the flags of the fault and restart scenarios.
func addFaultFlags(f *pflag.FlagSet, o *benchmarks.Options) {
	f.IntVar(&o.Mass.OriginalShoots, "mass-meltdown-original-shoots", 50, "mass-meltdown-original: the shoots on the seed, all melted.")
	f.IntVar(&o.Mass.Seed, "mass-meltdown-seed", 1000, "mass-meltdown-recover: the shoots on the seed.")
	f.IntVar(&o.Mass.Melt, "mass-meltdown-melt", 300, "mass-meltdown-recover: the shoots melted.")
	f.IntSliceVar(&o.Mass.Replicas, "mass-meltdown-replicas", []int{1, 3}, "mass-meltdown-recover: the numbers of replicas it runs on.")
	f.IntVar(&o.Lies.Shoots, "lies-shoots", 1000, "lies: the shoots on the seed, all lying.")
	f.IntVar(&o.Lies.Replicas, "lies-replicas", 1, "lies: the number of replicas.")
	f.DurationVar(&o.Lies.Duration, "lie-duration", 0, "lies: how long each lie is told (default 3 probe intervals; a slow body's delay is added).")
	f.DurationVar(&o.Lies.CacheLag, "lie-cache-lag", time.Minute, "lies: how old the stale watch cache's leases are when it stops.")
	f.DurationVar(&o.Lies.SlowBody, "lie-slow-body", 28*time.Second, "lies: how late the lease list's body arrives (the probe timeout is 30s).")
	f.DurationVar(&o.Lies.NodeClock, "lie-node-clock", -90*time.Second, "lies: the kubelets' clock offset.")
	f.DurationVar(&o.Lies.ServerClock, "lie-server-clock", time.Minute, "lies: the shoot API servers' clock offset (Date header).")
	f.IntVar(&o.Lies.HugeLeases, "huge-leases", 200_000, "lies: the extra Leases in the lease lists of --huge-shoots shoots.")
	f.IntVar(&o.Lies.HugeShoots, "huge-shoots", 2, "lies: the shoots with huge lease lists.")
	f.DurationVar(&o.Outage, "outage-duration", time.Minute, "outage: how long every replica is cut from the seed's API server.")
}

// addVerdictFlags adds the flags of the verdict scenarios.
func addVerdictFlags(f *pflag.FlagSet, o *benchmarks.Options) {
	f.StringVar(&o.Profile, "profile", benchmarks.ProfileBoth, "blip, detection: the prober settings they run at: "+benchmarks.ProfileDefault+" (the bench's, at --probe-interval), "+
		benchmarks.ProfileGardener+" (probeInterval 30s, qps 20, burst 100), or "+benchmarks.ProfileBoth+".")
	f.IntVar(&o.Blip.Seed, "blip-seed", 1000, "blip: the shoots on the seed.")
	f.IntVar(&o.Blip.Melt, "blip-melt", 600, "blip: the shoots whose kubelets stop renewing.")
	f.IntSliceVar(&o.Blip.Replicas, "blip-replicas", []int{1, 3}, "blip: the numbers of replicas it runs on.")
	f.DurationVar(&o.Blip.Outage, "blip-outage", 0, "blip: how long the kubelets stop renewing (default 0.75 × grace + the probe interval + 10s: 50s at 10s, 70s at 30s).")
	f.IntVar(&o.Detection.Seed, "detection-seed", 1000, "detection: the shoots on the seed.")
	f.IntVar(&o.Detection.Replicas, "detection-replicas", 3, "detection: the number of replicas (at least 2).")
	f.IntVar(&o.Detection.Shoots, "detection-shoots", 50, "detection: the shoots melted per round, all owned by one replica.")
	f.IntVar(&o.Detection.Rounds, "detection-rounds", 2, "detection: the rounds per case.")
	f.StringSliceVar(&o.Detection.Cases, "detection-cases", benchmarks.DetectionCases(), "detection: the cases to play: "+strings.Join(benchmarks.DetectionCases(), ", ")+".")
}
