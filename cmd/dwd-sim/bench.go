package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks"
	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/config"
)

// benchOptions are the bench command's flags.
type benchOptions struct {
	name, out, baseline, dwd, dir string
	scenarios                     []string
	shoots, replicas              []int
	nodes, repeats, meltdowns     int
	nodeImages                    int
	meltdownShoots, probeWorkers  int
	duration, interval            time.Duration
	outage                        time.Duration // how long the outage scenario cuts the seed's API server
	pprof                         bool
	mass                          massOptions
	lies                          liesOptions
	// profile is the prober settings the blip and detection scenarios run at (--profile).
	profile   string
	blip      blipOptions
	detection detectionOptions
}

// massOptions size the mass-meltdown scenario's parts.
type massOptions struct {
	originalShoots int   // (original) shoots melted on one replica with the original's client limits
	seed, melt     int   // (recover) shoots on the seed, and melted
	replicas       []int // (recover) the replica counts it runs on
}

// liesOptions size the lies scenario.
type liesOptions struct {
	shoots, replicas       int
	hugeLeases, hugeShoots int
	duration               time.Duration // how long each lie is told; 0: 3 probe intervals
	cacheLag, slowBody     time.Duration
	nodeClock, serverClock time.Duration
}

// The scenarios, and the parts the mass-meltdown scenario stands for.
const (
	scenarioSteady       = "steady"
	scenarioHandover     = "handover"
	scenarioMeltdown     = "meltdown"
	scenarioMassMeltdown = "mass-meltdown"
	scenarioMassOriginal = "mass-meltdown-original"
	scenarioMassRecover  = "mass-meltdown-recover"
	scenarioMassAll      = "mass-meltdown-all"
	scenarioLies         = "lies"
	scenarioRolling      = "rolling"
	scenarioOutage       = "outage"
	scenarioBlip         = "blip"
	scenarioDetection    = "detection"
)

var knownScenarios = []string{scenarioSteady, scenarioHandover, scenarioMeltdown, scenarioMassMeltdown, scenarioMassOriginal,
	scenarioMassRecover, scenarioMassAll, scenarioLies, scenarioRolling, scenarioOutage, scenarioBlip, scenarioDetection}

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
	o := benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive dwd replicas against simulated shoots and record the figures",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			quietLogs()
			return runBench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	o.addFlags(f)
	o.addFaultFlags(f)
	o.addVerdictFlags(f)
	return cmd
}

// addFlags adds the flags of the results, the seed, the default scenarios and the processes.
func (o *benchOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.name, "name", "latest", "Name of the result files.")
	f.StringVar(&o.out, "out", "benchmarks/results", "Folder of the result files.")
	f.StringVar(&o.baseline, "baseline", "benchmarks/results/baseline.json", "Result to compare with in the Markdown table (skipped when missing).")
	f.StringSliceVar(&o.scenarios, "scenarios", []string{scenarioSteady, scenarioHandover, scenarioMeltdown}, "Scenarios to run: "+strings.Join(knownScenarios, ", ")+".")
	f.IntSliceVar(&o.shoots, "shoots", []int{1000, 5000}, "Numbers of shoots of the steady scenario; the largest is used for the others.")
	f.IntSliceVar(&o.replicas, "replicas", []int{1, 3}, "Numbers of replicas of the steady scenario; the largest is used for the others.")
	f.IntVar(&o.nodes, "nodes", 3, "Nodes per shoot.")
	f.IntVar(&o.nodeImages, "node-images", 0, "Container images each Node lists in its status (a real node lists those it pulled).")
	f.DurationVar(&o.duration, "duration", 3*time.Minute, "How long each steady run is measured.")
	f.DurationVar(&o.interval, "probe-interval", 10*time.Second, "The prober's probeInterval.")
	f.IntVar(&o.probeWorkers, "probe-workers", 0, "Each replica's --probe-workers (0: no bound but the shoots).")
	f.IntVar(&o.repeats, "repeats", 10, "How often each handover event is played.")
	f.IntVar(&o.meltdowns, "meltdowns", 3, "How many meltdowns are played.")
	f.IntVar(&o.meltdownShoots, "meltdown-shoots", 20, "Shoots whose leases expire in each meltdown.")
	f.StringVar(&o.dwd, "dwd", "", "Path of the dwd binary (default: dwd next to this binary).")
	f.StringVar(&o.dir, "dir", "", "Folder for configs and replica logs (default: a new temporary folder).")
	f.BoolVar(&o.pprof, "pprof", false, "Give every replica a pprof endpoint; its address is in <dir>/<replica>.pprof.")
}

// addFaultFlags adds the flags of the fault and restart scenarios.
func (o *benchOptions) addFaultFlags(f *pflag.FlagSet) {
	f.IntVar(&o.mass.originalShoots, "mass-meltdown-original-shoots", 50, "mass-meltdown-original: the shoots on the seed, all melted.")
	f.IntVar(&o.mass.seed, "mass-meltdown-seed", 1000, "mass-meltdown-recover: the shoots on the seed.")
	f.IntVar(&o.mass.melt, "mass-meltdown-melt", 300, "mass-meltdown-recover: the shoots melted.")
	f.IntSliceVar(&o.mass.replicas, "mass-meltdown-replicas", []int{1, 3}, "mass-meltdown-recover: the numbers of replicas it runs on.")
	f.IntVar(&o.lies.shoots, "lies-shoots", 1000, "lies: the shoots on the seed, all lying.")
	f.IntVar(&o.lies.replicas, "lies-replicas", 1, "lies: the number of replicas.")
	f.DurationVar(&o.lies.duration, "lie-duration", 0, "lies: how long each lie is told (default 3 probe intervals; a slow body's delay is added).")
	f.DurationVar(&o.lies.cacheLag, "lie-cache-lag", time.Minute, "lies: how old the stale watch cache's leases are when it stops.")
	f.DurationVar(&o.lies.slowBody, "lie-slow-body", 28*time.Second, "lies: how late the lease list's body arrives (the probe timeout is 30s).")
	f.DurationVar(&o.lies.nodeClock, "lie-node-clock", -90*time.Second, "lies: the kubelets' clock offset.")
	f.DurationVar(&o.lies.serverClock, "lie-server-clock", time.Minute, "lies: the shoot API servers' clock offset (Date header).")
	f.IntVar(&o.lies.hugeLeases, "huge-leases", 200_000, "lies: the extra Leases in the lease lists of --huge-shoots shoots.")
	f.IntVar(&o.lies.hugeShoots, "huge-shoots", 2, "lies: the shoots with huge lease lists.")
	f.DurationVar(&o.outage, "outage-duration", time.Minute, "outage: how long every replica is cut from the seed's API server.")
}

// addVerdictFlags adds the flags of the verdict scenarios.
func (o *benchOptions) addVerdictFlags(f *pflag.FlagSet) {
	f.StringVar(&o.profile, "profile", profileBoth, "blip, detection: the prober settings they run at: "+profileDefault+" (the bench's, at --probe-interval), "+
		profileGardener+" (probeInterval 30s, qps 20, burst 100), or "+profileBoth+".")
	f.IntVar(&o.blip.seed, "blip-seed", 1000, "blip: the shoots on the seed.")
	f.IntVar(&o.blip.melt, "blip-melt", 600, "blip: the shoots whose kubelets stop renewing.")
	f.IntSliceVar(&o.blip.replicas, "blip-replicas", []int{1, 3}, "blip: the numbers of replicas it runs on.")
	f.DurationVar(&o.blip.outage, "blip-outage", 0, "blip: how long the kubelets stop renewing (default 0.75 × grace + the probe interval + 10s: 50s at 10s, 70s at 30s).")
	f.IntVar(&o.detection.seed, "detection-seed", 1000, "detection: the shoots on the seed.")
	f.IntVar(&o.detection.replicas, "detection-replicas", 3, "detection: the number of replicas (at least 2).")
	f.IntVar(&o.detection.shoots, "detection-shoots", 50, "detection: the shoots melted per round, all owned by one replica.")
	f.IntVar(&o.detection.rounds, "detection-rounds", 2, "detection: the rounds per case.")
	f.StringSliceVar(&o.detection.cases, "detection-cases", detectionCaseKeys(), "detection: the cases to play: "+strings.Join(detectionCaseKeys(), ", ")+".")
}

// validate checks the flags before anything starts.
func (o *benchOptions) validate() error {
	var errs []error
	for _, s := range o.scenarios {
		if !slices.Contains(knownScenarios, s) {
			errs = append(errs, fmt.Errorf("--scenarios: unknown scenario %q (%s)", s, strings.Join(knownScenarios, ", ")))
		}
	}
	if len(o.shoots) == 0 || slices.Min(o.shoots) < 1 {
		return errors.Join(append(errs, errors.New("--shoots: give at least one positive number"))...)
	}
	if len(o.replicas) == 0 || slices.Min(o.replicas) < 1 {
		return errors.Join(append(errs, errors.New("--replicas: give at least one positive number"))...)
	}
	largest := slices.Max(o.shoots)
	if o.runs(scenarioHandover) && slices.Max(o.replicas) < 2 {
		errs = append(errs, errors.New("--replicas: the handover scenario needs at least 2"))
	}
	if o.runs(scenarioMeltdown) && o.meltdownShoots > largest {
		errs = append(errs, errors.New("--meltdown-shoots: more than there are shoots"))
	}
	if o.runs(scenarioOutage) && o.outage <= 0 {
		errs = append(errs, errors.New("--outage-duration must be positive"))
	}
	if o.interval <= 0 || o.duration <= 0 || o.repeats < 1 || o.meltdowns < 1 || o.meltdownShoots < 1 || o.nodes < 1 || o.nodeImages < 0 || o.probeWorkers < 0 {
		errs = append(errs, errors.New("--probe-interval, --duration, --repeats, --meltdowns, --meltdown-shoots and --nodes must be positive, --node-images and --probe-workers not negative"))
	}
	errs = append(errs, o.mass.validate(o, largest), o.lies.validate(o, largest), o.validateVerdicts(largest))
	if o.name == "" || strings.ContainsAny(o.name, `/\`) {
		errs = append(errs, fmt.Errorf("--name %q: give a file name without a folder", o.name))
	}
	return errors.Join(errs...)
}

// validate checks the mass-meltdown flags of the parts that run.
func (m massOptions) validate(o *benchOptions, largest int) error {
	var errs []error
	if o.runs(scenarioMassOriginal) && (m.originalShoots < 1 || m.originalShoots > largest) {
		errs = append(errs, fmt.Errorf("--mass-meltdown-original-shoots: give 1 to the largest --shoots (%d)", largest))
	}
	if o.runs(scenarioMassRecover) {
		if m.seed < 1 || m.seed > largest || m.melt < 1 || m.melt > m.seed {
			errs = append(errs, fmt.Errorf("--mass-meltdown-seed, --mass-meltdown-melt: give 1 ≤ melt ≤ seed ≤ the largest --shoots (%d)", largest))
		}
		if len(m.replicas) == 0 || slices.Min(m.replicas) < 1 {
			errs = append(errs, errors.New("--mass-meltdown-replicas: give at least one positive number"))
		}
	}
	return errors.Join(errs...)
}

// validate checks the lies flags when the scenario runs.
func (l liesOptions) validate(o *benchOptions, largest int) error {
	if !o.runs(scenarioLies) {
		return nil
	}
	var errs []error
	if l.shoots < 1 || l.shoots > largest || l.replicas < 1 {
		errs = append(errs, fmt.Errorf("--lies-shoots, --lies-replicas: give 1 to the largest --shoots (%d) shoots and a positive replica count", largest))
	}
	if l.hugeShoots < 1 || l.hugeShoots > l.shoots || l.hugeLeases < 1 {
		errs = append(errs, errors.New("--huge-shoots, --huge-leases: give positive numbers, at most --lies-shoots huge shoots"))
	}
	if l.duration < 0 || l.cacheLag < 0 || l.slowBody < 0 {
		errs = append(errs, errors.New("--lie-duration, --lie-cache-lag and --lie-slow-body must not be negative"))
	}
	return errors.Join(errs...)
}

// runs reports whether a scenario runs: named, or a part of one named.
func (o *benchOptions) runs(scenario string) bool {
	if slices.Contains(o.scenarios, scenario) {
		return true
	}
	part := scenario == scenarioMassOriginal || scenario == scenarioMassRecover || scenario == scenarioMassAll
	return part && slices.Contains(o.scenarios, scenarioMassMeltdown)
}

// bench is the state of one benchmark run.
type bench struct {
	out      io.Writer
	opts     benchOptions
	dwd      string          // the dwd binary
	dwdHas   map[string]bool // which of the newer flags it has
	seed     *sim.Seed
	rs       *sim.ReplicaSet // the replicas of benchProfile
	scaling  *scaleTracker
	replicas []*sim.Replica // running, by name order
	shoots   int            // shoots created so far
	result   benchmarks.Result
}

// The member lease timings of the benchmarks: the defaults, as operators run them.
const (
	benchLeaseDuration = config.DefaultMemberLeaseDuration
	benchRenewDeadline = config.DefaultMemberRenewDeadline
	benchRetryPeriod   = config.DefaultMemberRetryPeriod
	benchReturnGrace   = config.DefaultReturnGrace
)

// The seed client's limits of the benchmarks: Gardener's, which deploys the watchdog with
// --kube-api-qps=20 --kube-api-burst=100. The original's defaults (5 and 10) queue the scale-downs of
// a meltdown of many shoots at once behind each other.
const (
	benchKubeAPIQPS   = 20.0
	benchKubeAPIBurst = 100
)

// runBench runs the scenarios and writes the results.
func runBench(ctx context.Context, out io.Writer, o benchOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	slices.Sort(o.shoots)
	slices.Sort(o.replicas)
	dwd, err := sim.FindDwd(o.dwd)
	if err != nil {
		return err
	}
	has, err := dwdFlags(ctx, dwd, flagScaleWorkers, flagScaleQPS, flagScaleBurst, flagMaxResponseBytes, flagMaxResponseItems, flagLeaveMode,
		flagLeaderElectionNamespace)
	if err != nil {
		return err
	}
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "dwd-bench-"); err != nil {
			return err
		}
	}
	for _, dir := range []string{o.dir, o.out} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	version, err := exec.CommandContext(ctx, dwd, "version").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", dwd, err)
	}
	b := &bench{out: out, opts: o, dwd: dwd, dwdHas: has, result: benchmarks.Result{
		Name: o.name, Command: commandLine(), Dwd: strings.TrimSpace(string(version)), Started: time.Now().UTC().Format(time.RFC3339), Machine: machine(),
		Settings: benchmarks.Settings{
			ProbeIntervalSeconds: o.interval.Seconds(), MemberLeaseDurationSeconds: benchLeaseDuration.Seconds(),
			MemberRenewDeadlineSeconds: benchRenewDeadline.Seconds(), MemberRetryPeriodSeconds: benchRetryPeriod.Seconds(),
			Partitions: sim.Partitions, NodesPerShoot: o.nodes, NodeImages: o.nodeImages, ProbeWorkers: o.probeWorkers,
			KubeAPIQPS: benchKubeAPIQPS, KubeAPIBurst: benchKubeAPIBurst,
		},
	}}
	fmt.Fprintf(out, "Starting a local seed (kube-apiserver and etcd); replica logs in %s\n", o.dir)
	if b.seed, err = sim.StartSeedWith(ctx, o.dir, sim.ShootServerOptions{NodeImages: o.nodeImages}); err != nil {
		return err
	}
	defer b.tearDown()
	if err := b.seed.CreateNamespace(ctx, benchNamespace); err != nil {
		return err
	}
	if b.rs, err = b.replicaSet(benchProfile); err != nil {
		return err
	}
	if b.scaling, err = startScaleTracker(ctx, b.seed.Env.Config); err != nil {
		return err
	}
	// What ran before a failure is written too: a long run should not lose its figures to its end.
	runErr := b.run(ctx)
	if runErr != nil {
		b.result.Error = runErr.Error()
	}
	b.result.Goals = goals(&b.result)
	return errors.Join(runErr, b.write())
}

// stage is one step of a run: a scenario, or a part of one, at a number of shoots.
type stage struct {
	shoots int
	run    func(context.Context) error
}

// run plays the chosen scenarios in the order of the shoots they need (steady at each load, then
// handover and meltdown at the largest, in that order at equal loads), since the seed only grows.
func (b *bench) run(ctx context.Context) error {
	for _, st := range inOrder(b.stages()) {
		if err := st.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// inOrder sorts stages by the shoots they need, keeping the order of those that need as many.
func inOrder(stages []stage) []stage {
	slices.SortStableFunc(stages, func(x, y stage) int { return x.shoots - y.shoots })
	return stages
}

// stages are the steps of the chosen scenarios, in the order they are declared.
func (b *bench) stages() []stage {
	o := b.opts
	shoots, replicas := slices.Max(o.shoots), slices.Max(o.replicas)
	var stages []stage
	if o.runs(scenarioSteady) {
		for _, n := range o.shoots {
			for _, r := range o.replicas {
				stages = append(stages, stage{n, func(ctx context.Context) error {
					run, err := b.steady(ctx, n, r)
					if err != nil {
						return fmt.Errorf("steady, %d shoots, %d replicas: %w", n, r, err)
					}
					b.result.Steady = append(b.result.Steady, run)
					return nil
				}})
			}
		}
	}
	if o.runs(scenarioHandover) {
		stages = append(stages, stage{shoots, func(ctx context.Context) error {
			h, err := b.handover(ctx, shoots, replicas)
			b.result.Handover = h
			return wrap("handover", err)
		}})
	}
	if o.runs(scenarioMeltdown) {
		stages = append(stages, stage{shoots, func(ctx context.Context) error {
			m, err := b.meltdown(ctx, shoots, replicas)
			b.result.Meltdown = m
			return wrap("meltdown", err)
		}})
	}
	stages = append(append(stages, b.massStages(shoots, replicas)...), b.liesStages()...)
	stages = append(stages, b.restartStages(shoots, replicas)...)
	return append(append(stages, b.blipStages()...), b.detectionStages()...)
}

// wrap prefixes an error with the scenario it happened in; nil stays nil.
func wrap(scenario string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", scenario, err)
	}
	return nil
}

// tearDown stops the replicas and the seed.
func (b *bench) tearDown() {
	if b.scaling != nil {
		b.scaling.stop()
	}
	for _, r := range b.replicas {
		if r.Running() {
			r.Terminate(10 * time.Second)
		}
	}
	if err := b.seed.Stop(); err != nil {
		fmt.Fprintln(b.out, "stopping the seed:", err)
	}
}

// write writes the JSON, Markdown and PNG files and prints the Markdown.
func (b *bench) write() error {
	base := filepath.Join(b.opts.out, b.opts.name)
	if err := b.result.WriteJSON(base + ".json"); err != nil {
		return err
	}
	var baseline *benchmarks.Result
	if b.opts.baseline != "" && filepath.Clean(b.opts.baseline) != filepath.Clean(base+".json") {
		if r, err := benchmarks.ReadResult(b.opts.baseline); err == nil {
			baseline = r
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("reading the baseline: %w", err)
		}
	}
	var md strings.Builder
	if err := b.result.WriteMarkdown(&md, baseline); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(md.String()), 0o644); err != nil {
		return err
	}
	if points := b.result.ChartPoints(); len(points) > 0 {
		f, err := os.Create(base + ".png")
		if err != nil {
			return err
		}
		title := fmt.Sprintf("dwd steady state, probe interval %s (%s)", b.opts.interval, b.result.Name)
		if err := benchmarks.WriteChart(f, title, points); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Fprintf(b.out, "\n%s\nWrote %s.json, .md and .png\n", md.String(), base)
	return nil
}

// commandLine is how this process was started, the program by its base name.
func commandLine() string {
	args := append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)
	return strings.Join(args, " ")
}

// machine describes this machine: cores, memory (Linux), CPU model (Linux) and Go.
func machine() benchmarks.Machine {
	m := benchmarks.Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	m.MemoryBytes = procField("/proc/meminfo", "MemTotal", func(v string) uint64 {
		kib, _ := strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64)
		return kib * 1024
	})
	m.CPUModel = procField("/proc/cpuinfo", "model name", func(v string) string { return v })
	return m
}

// procField reads the first "key: value" line of a /proc file with the given key; the zero value
// when there is none.
func procField[T any](path, key string, parse func(string) T) T {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		k, v, ok := strings.Cut(scanner.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return parse(strings.TrimSpace(v))
		}
	}
	return zero
}
