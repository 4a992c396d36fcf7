package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
	meltdownShoots, probeWorkers  int
	duration, interval            time.Duration
	pprof                         bool
}

func newBenchCommand() *cobra.Command {
	o := benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive dwd replicas against simulated shoots and record the figures",
		Long: `Starts a local seed with simulated shoots and runs dwd replicas as separate processes through
the load scenarios:

  steady    every shoot healthy, at each number of shoots × replicas, for --duration each
  handover  a replica leaves gracefully, joins, and is killed (-9), --repeats times each
  meltdown  the node leases of --meltdown-shoots shoots expire at once, --meltdowns times

It writes <out>/<name>.json, <name>.md (with the baseline's figures in brackets, when there is one)
and <name>.png (probes/s and CPU per replica against replica count).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			quietLogs()
			return runBench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "latest", "Name of the result files.")
	f.StringVar(&o.out, "out", "benchmarks/results", "Folder of the result files.")
	f.StringVar(&o.baseline, "baseline", "benchmarks/results/baseline.json", "Result to compare with in the Markdown table (skipped when missing).")
	f.StringSliceVar(&o.scenarios, "scenarios", []string{"steady", "handover", "meltdown"}, "Scenarios to run.")
	f.IntSliceVar(&o.shoots, "shoots", []int{1000, 5000}, "Numbers of shoots of the steady scenario; the largest is used for the others.")
	f.IntSliceVar(&o.replicas, "replicas", []int{1, 3}, "Numbers of replicas of the steady scenario; the largest is used for the others.")
	f.IntVar(&o.nodes, "nodes", 3, "Nodes per shoot.")
	f.DurationVar(&o.duration, "duration", 3*time.Minute, "How long each steady run is measured.")
	f.DurationVar(&o.interval, "probe-interval", 10*time.Second, "The prober's probeInterval.")
	f.IntVar(&o.probeWorkers, "probe-workers", 32, "Each replica's --probe-workers.")
	f.IntVar(&o.repeats, "repeats", 10, "How often each handover event is played.")
	f.IntVar(&o.meltdowns, "meltdowns", 3, "How many meltdowns are played.")
	f.IntVar(&o.meltdownShoots, "meltdown-shoots", 20, "Shoots whose leases expire in each meltdown.")
	f.StringVar(&o.dwd, "dwd", "", "Path of the dwd binary (default: dwd next to this binary).")
	f.StringVar(&o.dir, "dir", "", "Folder for configs and replica logs (default: a new temporary folder).")
	f.BoolVar(&o.pprof, "pprof", false, "Give every replica a pprof endpoint; its address is in <dir>/<replica>.pprof.")
	return cmd
}

// validate checks the flags before anything starts.
func (o *benchOptions) validate() error {
	var errs []error
	for _, s := range o.scenarios {
		if !slices.Contains([]string{"steady", "handover", "meltdown"}, s) {
			errs = append(errs, fmt.Errorf("--scenarios: unknown scenario %q (steady, handover, meltdown)", s))
		}
	}
	if len(o.shoots) == 0 || slices.Min(o.shoots) < 1 {
		errs = append(errs, errors.New("--shoots: give at least one positive number"))
	}
	if len(o.replicas) == 0 || slices.Min(o.replicas) < 1 {
		errs = append(errs, errors.New("--replicas: give at least one positive number"))
	}
	if o.runs("handover") && slices.Max(o.replicas) < 2 {
		errs = append(errs, errors.New("--replicas: the handover scenario needs at least 2"))
	}
	if o.runs("meltdown") && o.meltdownShoots > slices.Max(o.shoots) {
		errs = append(errs, errors.New("--meltdown-shoots: more than there are shoots"))
	}
	if o.interval <= 0 || o.duration <= 0 || o.repeats < 1 || o.meltdowns < 1 || o.meltdownShoots < 1 || o.nodes < 1 || o.probeWorkers < 1 {
		errs = append(errs, errors.New("--probe-interval, --duration, --repeats, --meltdowns, --meltdown-shoots, --nodes and --probe-workers must be positive"))
	}
	if o.name == "" || strings.ContainsAny(o.name, `/\`) {
		errs = append(errs, fmt.Errorf("--name %q: give a file name without a folder", o.name))
	}
	return errors.Join(errs...)
}

func (o *benchOptions) runs(scenario string) bool { return slices.Contains(o.scenarios, scenario) }

// bench is the state of one benchmark run.
type bench struct {
	out      io.Writer
	opts     benchOptions
	seed     *sim.Seed
	rs       *replicaSet
	replicas []*replica // running, by name order
	shoots   int        // shoots created so far
	result   benchmarks.Result
}

// The member lease timings of the benchmarks: the defaults, as operators run them.
const (
	benchLeaseDuration = config.DefaultMemberLeaseDuration
	benchRenewDeadline = config.DefaultMemberRenewDeadline
	benchRetryPeriod   = config.DefaultMemberRetryPeriod
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
	dwd, err := dwdPath(o.dwd)
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
	b := &bench{out: out, opts: o, result: benchmarks.Result{
		Name: o.name, Command: commandLine(), Started: time.Now().UTC().Format(time.RFC3339), Machine: machine(),
		Settings: benchmarks.Settings{
			ProbeIntervalSeconds: o.interval.Seconds(), MemberLeaseDurationSeconds: benchLeaseDuration.Seconds(),
			MemberRenewDeadlineSeconds: benchRenewDeadline.Seconds(), MemberRetryPeriodSeconds: benchRetryPeriod.Seconds(),
			Partitions: partitions, NodesPerShoot: o.nodes, ProbeWorkers: o.probeWorkers,
			KubeAPIQPS: benchKubeAPIQPS, KubeAPIBurst: benchKubeAPIBurst,
		},
	}}
	fmt.Fprintf(out, "Starting a local seed (kube-apiserver and etcd); replica logs in %s\n", o.dir)
	if b.seed, err = sim.StartSeed(ctx, o.dir); err != nil {
		return err
	}
	defer b.tearDown()
	if err := b.seed.CreateNamespace(ctx, demoNamespace); err != nil {
		return err
	}
	if b.rs, err = b.replicaSet(dwd); err != nil {
		return err
	}
	if err := b.run(ctx); err != nil {
		return err
	}
	return b.write()
}

// run plays the chosen scenarios in order: steady at each load, then handover and meltdown at the
// largest.
func (b *bench) run(ctx context.Context) error {
	o := b.opts
	if o.runs("steady") {
		for _, shoots := range o.shoots {
			for _, replicas := range o.replicas {
				run, err := b.steady(ctx, shoots, replicas)
				if err != nil {
					return fmt.Errorf("steady, %d shoots, %d replicas: %w", shoots, replicas, err)
				}
				b.result.Steady = append(b.result.Steady, run)
			}
		}
	}
	shoots, replicas := slices.Max(o.shoots), slices.Max(o.replicas)
	if o.runs("handover") {
		h, err := b.handover(ctx, shoots, replicas)
		if err != nil {
			return fmt.Errorf("handover: %w", err)
		}
		b.result.Handover = h
	}
	if o.runs("meltdown") {
		m, err := b.meltdown(ctx, shoots, replicas)
		if err != nil {
			return fmt.Errorf("meltdown: %w", err)
		}
		b.result.Meltdown = m
	}
	b.result.Goals = goals(&b.result)
	return nil
}

// replicaSet writes the configs: the demo's, at the benchmark's probe interval.
func (b *bench) replicaSet(dwd string) (*replicaSet, error) {
	prober := filepath.Join(b.opts.dir, "prober.yaml")
	weeder := filepath.Join(b.opts.dir, "weeder.yaml")
	if err := os.WriteFile(prober, []byte(proberConfig(b.opts.interval)), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(weeder, []byte(demoWeederConfig), 0o644); err != nil {
		return nil, err
	}
	return &replicaSet{dwd: dwd, dir: b.opts.dir, pprof: b.opts.pprof, baseArgs: []string{
		"--kubeconfig=" + b.seed.KubeconfigPath(), "--prober-config=" + prober, "--weeder-config=" + weeder,
		"--shard-namespace=" + demoNamespace, "--probe-workers=" + strconv.Itoa(b.opts.probeWorkers),
		"--kube-api-qps=" + strconv.FormatFloat(benchKubeAPIQPS, 'f', -1, 64), "--kube-api-burst=" + strconv.Itoa(benchKubeAPIBurst),
		"--zap-log-level=info", "--zap-time-encoding=rfc3339nano",
	}}, nil
}

// tearDown stops the replicas and the seed.
func (b *bench) tearDown() {
	for _, r := range b.replicas {
		if r.running() {
			r.terminate(10 * time.Second)
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

// proberConfig is the demo's prober config at another probe interval.
func proberConfig(interval time.Duration) string {
	return strings.Replace(demoProberConfig, "probeInterval: 2s", "probeInterval: "+interval.String(), 1)
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
