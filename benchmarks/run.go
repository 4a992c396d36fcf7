package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/config"
)

// bench is the state of one benchmark run.
type bench struct {
	out      io.Writer
	opts     Options
	dwd      string          // the dwd binary
	dwdHas   map[string]bool // which of the newer flags it has
	seed     *sim.Seed
	rs       *sim.ReplicaSet // the replicas of benchProfile
	scaling  *scaleTracker
	replicas []*sim.Replica // running, by name order
	shoots   int            // shoots created so far
	result   Result
}

// benchNamespace is where the bench's replicas keep their Leases.
const benchNamespace = "garden"

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

// Run starts a seed with simulated shoots, plays the scenarios of o against dwd replicas and writes
// the results (what ran before a failure too), printing its progress to out.
func Run(ctx context.Context, out io.Writer, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	slices.Sort(o.Shoots)
	slices.Sort(o.Replicas)
	dwd, err := sim.FindDwd(o.Dwd)
	if err != nil {
		return err
	}
	has, err := dwdFlags(ctx, dwd, flagScaleWorkers, flagScaleQPS, flagScaleBurst, flagMaxResponseBytes, flagMaxResponseItems, flagLeaveMode,
		flagLeaderElectionNamespace)
	if err != nil {
		return err
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "dwd-bench-"); err != nil {
			return err
		}
	}
	for _, dir := range []string{o.Dir, o.Out} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	version, err := exec.CommandContext(ctx, dwd, "version").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", dwd, err)
	}
	b := &bench{out: out, opts: o, dwd: dwd, dwdHas: has, result: Result{
		Name: o.Name, Command: commandLine(), Dwd: strings.TrimSpace(string(version)), Started: time.Now().UTC().Format(time.RFC3339), Machine: machine(),
		Settings: settingsOf(o),
	}}
	fmt.Fprintf(out, "Starting a local seed (kube-apiserver and etcd); replica logs in %s\n", o.Dir)
	if b.seed, err = sim.StartSeedWith(ctx, o.Dir, sim.SeedOptions{Shoots: sim.ShootServerOptions{NodeImages: o.NodeImages},
		WithoutShardSelectors: o.WithoutShardSelectors}); err != nil {
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

// settingsOf are the settings of a run of o.
func settingsOf(o Options) Settings {
	return Settings{
		ProbeIntervalSeconds: o.Interval.Seconds(), MemberLeaseDurationSeconds: benchLeaseDuration.Seconds(),
		MemberRenewDeadlineSeconds: benchRenewDeadline.Seconds(), MemberRetryPeriodSeconds: benchRetryPeriod.Seconds(),
		Partitions: sim.Partitions, NodesPerShoot: o.Nodes, NodeImages: o.NodeImages, ProbeWorkers: o.ProbeWorkers,
		KubeAPIQPS: benchKubeAPIQPS, KubeAPIBurst: benchKubeAPIBurst,
		CacheSharding: o.CacheSharding, ShardSelectors: !o.WithoutShardSelectors,
	}
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
	shoots, replicas := slices.Max(o.Shoots), slices.Max(o.Replicas)
	var stages []stage
	if o.runs(scenarioSteady) {
		for _, n := range o.Shoots {
			for _, r := range o.Replicas {
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
	if o.runs(scenarioRoles) {
		stages = append(stages, b.rolesStage(shoots))
	}
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
	base := filepath.Join(b.opts.Out, b.opts.Name)
	if err := b.result.WriteJSON(base + ".json"); err != nil {
		return err
	}
	var baseline *Result
	if b.opts.Baseline != "" && filepath.Clean(b.opts.Baseline) != filepath.Clean(base+".json") {
		if r, err := ReadResult(b.opts.Baseline); err == nil {
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
		title := fmt.Sprintf("dwd steady state, probe interval %s (%s)", b.opts.Interval, b.result.Name)
		if err := WriteChart(f, title, points); err != nil {
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

// machine describes this machine: cores, memory (Linux), CPU model (Linux) and Go; what /proc does not
// tell (another OS) stays at its zero value.
func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return m
	}
	if info, err := fs.Meminfo(); err == nil && info.MemTotalBytes != nil {
		m.MemoryBytes = *info.MemTotalBytes
	}
	if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 {
		m.CPUModel = cpus[0].ModelName
	}
	return m
}
