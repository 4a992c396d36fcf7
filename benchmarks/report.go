package benchmarks

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Result is one run of the load benchmarks, as written to benchmarks/results/<name>.json. Seconds and
// bytes are plain numbers.
type Result struct {
	Name    string `json:"name"`
	Command string `json:"command"`
	// Dwd is what the dwd binary's version command printed.
	Dwd     string  `json:"dwd,omitempty"`
	Started string  `json:"started"` // RFC 3339
	Machine Machine `json:"machine"`
	// Error is why the run stopped early; the figures are those of the scenarios done by then.
	Error string `json:"error,omitempty"`
	// Settings are the timings every scenario ran with.
	Settings Settings    `json:"settings"`
	Steady   []SteadyRun `json:"steady,omitempty"`
	Handover *Handover   `json:"handover,omitempty"`
	Meltdown *Meltdown   `json:"meltdown,omitempty"`
	// MassMeltdown and Lies are the fault scenarios; their replicas' client limits and prober
	// settings may differ from Settings, and are given with them.
	MassMeltdown *MassMeltdown `json:"mass_meltdown,omitempty"`
	Lies         *Lies         `json:"lies,omitempty"`
	// Rolling and Outage are the restart scenarios, with Settings' timings and client limits.
	Rolling *Rolling `json:"rolling,omitempty"`
	Outage  *Outage  `json:"outage,omitempty"`
	// Blips and Detection are the verdict scenarios, at each profile that ran (--profile), which
	// each carries.
	Blips     []Blip      `json:"blips,omitempty"`
	Detection []Detection `json:"detection,omitempty"`
	// Roles are the roles measured alone (the roles scenario).
	Roles []RoleRun `json:"roles,omitempty"`
	Goals []Goal    `json:"goals,omitempty"`
}

// Machine is what the run ran on.
type Machine struct {
	Cores       int    `json:"cores"`
	MemoryBytes uint64 `json:"memory_bytes"`
	CPUModel    string `json:"cpu_model,omitempty"`
	GoVersion   string `json:"go_version"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
}

// Settings are the prober and sharding timings of the run.
type Settings struct {
	ProbeIntervalSeconds       float64 `json:"probe_interval_seconds"`
	MemberLeaseDurationSeconds float64 `json:"member_lease_duration_seconds"`
	MemberRenewDeadlineSeconds float64 `json:"member_renew_deadline_seconds"`
	MemberRetryPeriodSeconds   float64 `json:"member_retry_period_seconds"`
	Partitions                 int     `json:"partitions"`
	NodesPerShoot              int     `json:"nodes_per_shoot"`
	// NodeImages is how many container images each Node lists in its status.
	NodeImages   int `json:"node_images,omitempty"`
	ProbeWorkers int `json:"probe_workers"`
	// KubeAPIQPS and KubeAPIBurst limit each replica's seed client (--kube-api-qps/--kube-api-burst).
	KubeAPIQPS   float64 `json:"kube_api_qps"`
	KubeAPIBurst int     `json:"kube_api_burst"`
	// CacheSharding is the replicas' --cache-sharding ("": dwd's default); ShardSelectors whether the
	// seed's kube-apiserver applies shard selectors (feature gate ShardedListAndWatch).
	CacheSharding  string `json:"cache_sharding,omitempty"`
	ShardSelectors bool   `json:"shard_selectors"`
}

// nodeImagesNote says how many images each Node lists, when it lists any.
func nodeImagesNote(images int) string {
	if images == 0 {
		return ""
	}
	return fmt.Sprintf(" (each listing %d container images)", images)
}

// SteadyRun is the steady scenario at one load: every shoot healthy, probed every interval.
type SteadyRun struct {
	Shoots          int     `json:"shoots"`
	Replicas        int     `json:"replicas"`
	DurationSeconds float64 `json:"duration_seconds"`
	Probes          float64 `json:"probes"`
	ProbesPerSecond float64 `json:"probes_per_second"`
	// The lag quantiles are interpolated within dwd_probe_lag_seconds' buckets, as histogram_quantile
	// does.
	ProbeLagP50Seconds float64 `json:"probe_lag_p50_seconds"`
	ProbeLagP99Seconds float64 `json:"probe_lag_p99_seconds"`
	MissedCycles       float64 `json:"missed_cycles"`
	// Per replica, in the order of their names.
	ProbesPerSecondPerReplica []float64 `json:"probes_per_second_per_replica"`
	CPUSecondsPer1000Probes   []float64 `json:"cpu_seconds_per_1000_probes"`
	// CPUSecondsPer1000HealthyProbes is process_cpu_seconds_total over the probes whose result was
	// healthy (dwd_probes_total{result="healthy"}), per 1,000.
	CPUSecondsPer1000HealthyProbes []float64 `json:"cpu_seconds_per_1000_healthy_probes,omitempty"`
	CPUCores                       []float64 `json:"cpu_cores"`
	RSSBytes                       []float64 `json:"rss_bytes"`
	// CacheObjects are the objects the replica's sharded caches hold (dwd_cache_objects), and
	// ChurnEventsReceived the watch events they received when every shoot's kubeconfig Secret changed
	// once after the measured window (dwd_cache_objects_received_total, kept or dropped).
	CacheObjects        []float64 `json:"cache_objects,omitempty"`
	ChurnEventsReceived []float64 `json:"churn_events_received,omitempty"`
	// Seed requests of every kind (watchdog and sharding) per probe; the split is below.
	SeedRequestsPerProbe         float64 `json:"seed_requests_per_probe"`
	SeedWatchdogRequestsPerProbe float64 `json:"seed_watchdog_requests_per_probe"`
	SeedShardingRequestsPerProbe float64 `json:"seed_sharding_requests_per_probe"`
	ShootRequestsPerProbe        float64 `json:"shoot_requests_per_probe"`
	// ConsistentLeaseListsPerProbe are the shoots' lease lists without a resourceVersion (fresh reads,
	// which a prober should send only to confirm a scale-down) per probe.
	ConsistentLeaseListsPerProbe float64 `json:"consistent_lease_lists_per_probe"`
	// UnhealthyProbes counts probes whose result was not healthy; a steady run expects none.
	UnhealthyProbes float64 `json:"unhealthy_probes"`
}

// Handover is the handover scenario: replicas leave gracefully, join, and are killed, one at a time.
type Handover struct {
	Shoots   int `json:"shoots"`
	Replicas int `json:"replicas"`
	Repeats  int `json:"repeats"`
	// The times run from the event (SIGTERM, process start, SIGKILL) until every partition is held by
	// its owner in the ring of the live members and every shoot that moved was probed by its new owner.
	HandoverGracefulP99Seconds float64   `json:"handover_graceful_p99_seconds"`
	HandoverJoinP99Seconds     float64   `json:"handover_join_p99_seconds"`
	HandoverKillP99Seconds     float64   `json:"handover_kill_p99_seconds"`
	GracefulSeconds            []float64 `json:"graceful_seconds"`
	// GracefulLateSeconds are, per graceful leave, how much later than a probe interval after its
	// previous probe the most delayed moved shoot was probed (its longest gap between two probes in a
	// row, by any replica, less the interval; 0 when none came late): what the leave cost the shoots,
	// where the times above include the lead in which the leaving replica still probes them.
	GracefulLateSeconds     []float64 `json:"graceful_late_seconds,omitempty"`
	HandoverGracefulLateP99 float64   `json:"handover_graceful_late_p99_seconds,omitempty"`
	JoinSeconds             []float64 `json:"join_seconds"`
	KillSeconds             []float64 `json:"kill_seconds"`
	// MovedFractionOverIdeal is the mean over all events of the fraction of shoots that changed
	// replica, over the ideal (1/replicas); MovedFractionOverIdealMax is the worst event.
	MovedFractionOverIdeal    float64 `json:"moved_fraction_over_ideal"`
	MovedFractionOverIdealMax float64 `json:"moved_fraction_over_ideal_max"`
	// BalanceMaxOverMean is the worst, over the settled states with all replicas, of the most shoots
	// a replica probes over the mean.
	BalanceMaxOverMean float64 `json:"balance_max_over_mean"`
	// The partition lease writes of the prober's group per event, from the event until the group
	// settled, the mean over the event's repeats.
	GracefulWrites float64 `json:"graceful_partition_writes,omitempty"`
	JoinWrites     float64 `json:"join_partition_writes,omitempty"`
	KillWrites     float64 `json:"kill_partition_writes,omitempty"`
	// MemberWritesPerSecond is the rate of the prober group's member lease writes while it is settled
	// with every replica, before the first event.
	MemberWritesPerSecond float64 `json:"member_writes_per_second,omitempty"`
}

// Meltdown is the meltdown scenario: the node leases of some shoots expire at once.
type Meltdown struct {
	Shoots  int `json:"shoots"`
	Samples int `json:"samples"`
	// From the moment the leases cross the threshold until the first scale-down write the seed's API
	// server reports (a watch event).
	DetectionToScaledownP50Seconds float64   `json:"detection_to_scaledown_p50_seconds"`
	DetectionToScaledownP99Seconds float64   `json:"detection_to_scaledown_p99_seconds"`
	DetectionToScaledownSeconds    []float64 `json:"detection_to_scaledown_seconds"`
}

// Goal is one of the figures the benchmarks must meet.
type Goal struct {
	Goal     string `json:"goal"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// WriteJSON writes r to path, indented.
func (r *Result) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadResult reads a result written by WriteJSON.
func ReadResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Result{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ChartPoints are the steady runs as the chart shows them.
func (r *Result) ChartPoints() []ChartPoint {
	points := make([]ChartPoint, 0, len(r.Steady))
	for _, s := range r.Steady {
		points = append(points, ChartPoint{Shoots: s.Shoots, Replicas: s.Replicas,
			ProbesPerSecondPerReplica: mean(s.ProbesPerSecondPerReplica), CPUCoresPerReplica: mean(s.CPUCores)})
	}
	return points
}

// WriteMarkdown writes the result as Markdown tables. With a baseline, each steady figure is followed
// by the baseline's in brackets.
func (r *Result) WriteMarkdown(w io.Writer, baseline *Result) error {
	var b strings.Builder
	r.writeHeader(&b, baseline)
	r.writeSteady(&b, baseline)
	if h := r.Handover; h != nil {
		fmt.Fprintf(&b, "\n## Handover\n\n%d shoots, %d replicas, each event %d times; the prober group's member lease writes %.2f/s when settled.\n\n| event | p99 s | partition lease writes (mean) | all s |\n|---|---|---|---|\n",
			h.Shoots, h.Replicas, h.Repeats, h.MemberWritesPerSecond)
		fmt.Fprintf(&b, "| graceful leave | %.2f | %.0f | %s |\n", h.HandoverGracefulP99Seconds, h.GracefulWrites, list(h.GracefulSeconds, "%.2f", 1))
		if len(h.GracefulLateSeconds) > 0 {
			fmt.Fprintf(&b, "| graceful leave: a moved shoot's probe later than an interval after the one before | %.2f | | %s |\n", h.HandoverGracefulLateP99, list(h.GracefulLateSeconds, "%.2f", 1))
		}
		fmt.Fprintf(&b, "| join | %.2f | %.0f | %s |\n", h.HandoverJoinP99Seconds, h.JoinWrites, list(h.JoinSeconds, "%.2f", 1))
		fmt.Fprintf(&b, "| kill -9 | %.2f | %.0f | %s |\n", h.HandoverKillP99Seconds, h.KillWrites, list(h.KillSeconds, "%.2f", 1))
		fmt.Fprintf(&b, "\nMoved fraction over ideal: %.3f mean, %.3f worst. Balance (max/mean shoots per replica): %.3f worst.\n",
			h.MovedFractionOverIdeal, h.MovedFractionOverIdealMax, h.BalanceMaxOverMean)
	}
	if md := r.Meltdown; md != nil {
		fmt.Fprintf(&b, "\n## Meltdown\n\n%d shoots, %d meltdowns: leases expired → first scale-down write p50 %.2f s, p99 %.2f s.\n",
			md.Shoots, md.Samples, md.DetectionToScaledownP50Seconds, md.DetectionToScaledownP99Seconds)
	}
	r.writeFaults(&b)
	r.writeRestarts(&b)
	r.writeRoles(&b)
	r.writeVerdicts(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHeader writes the title, the command, the machine, the settings, an early stop and the goals.
func (r *Result) writeHeader(b *strings.Builder, baseline *Result) {
	m := r.Machine
	fmt.Fprintf(b, "# Load benchmark %s\n\n", r.Name)
	fmt.Fprintf(b, "`%s`, started %s on %d cores, %.1f GiB, %s, %s/%s", r.Command, r.Started, m.Cores,
		float64(m.MemoryBytes)/(1<<30), m.GoVersion, m.OS, m.Arch)
	if m.CPUModel != "" {
		fmt.Fprintf(b, ", %s", m.CPUModel)
	}
	if r.Dwd != "" {
		fmt.Fprintf(b, "; %s", r.Dwd)
	}
	s := r.Settings
	fmt.Fprintf(b, ".\nProbe interval %gs, member lease %gs (renew deadline %gs, retry %gs), %d partitions, %d nodes per shoot%s, %d probe workers and seed client %g QPS (burst %d) per replica.\n",
		s.ProbeIntervalSeconds, s.MemberLeaseDurationSeconds, s.MemberRenewDeadlineSeconds, s.MemberRetryPeriodSeconds,
		s.Partitions, s.NodesPerShoot, nodeImagesNote(s.NodeImages), s.ProbeWorkers, s.KubeAPIQPS, s.KubeAPIBurst)
	if baseline != nil {
		fmt.Fprintf(b, "Figures in brackets are the baseline's (%s, %s).\n", baseline.Name, baseline.Started)
	}
	if r.Error != "" {
		fmt.Fprintf(b, "\n**Stopped early:** %s\n", r.Error)
	}
	if len(r.Goals) > 0 {
		b.WriteString("\n## Goals\n\n| goal | target | measured | met |\n|---|---|---|---|\n")
		for _, g := range r.Goals {
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", g.Goal, g.Target, g.Measured, yesNo(g.Met))
		}
	}
}

// writeSteady writes the table of the steady runs, with the baseline's figures in brackets.
func (r *Result) writeSteady(b *strings.Builder, baseline *Result) {
	if len(r.Steady) == 0 {
		return
	}
	b.WriteString("\n## Steady\n\n| shoots | replicas | probes/s | lag p50 s | lag p99 s | missed cycles | CPU s per 1000 probes (per replica) | CPU cores (per replica) | RSS MiB (per replica) | seed req/probe | shoot req/probe | consistent lease lists/probe |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.Steady {
		base := baseline.SteadyAt(run.Shoots, run.Replicas)
		fmt.Fprintf(b, "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.4f |\n", run.Shoots, run.Replicas,
			withBase(run.ProbesPerSecond, base, func(s *SteadyRun) float64 { return s.ProbesPerSecond }, "%.1f"),
			withBase(run.ProbeLagP50Seconds, base, func(s *SteadyRun) float64 { return s.ProbeLagP50Seconds }, "%.3f"),
			withBase(run.ProbeLagP99Seconds, base, func(s *SteadyRun) float64 { return s.ProbeLagP99Seconds }, "%.3f"),
			withBase(run.MissedCycles, base, func(s *SteadyRun) float64 { return s.MissedCycles }, "%.0f"),
			list(run.CPUSecondsPer1000Probes, "%.3f", 1), list(run.CPUCores, "%.3f", 1), list(run.RSSBytes, "%.0f", 1<<20),
			withBase(run.SeedRequestsPerProbe, base, func(s *SteadyRun) float64 { return s.SeedRequestsPerProbe }, "%.4f"),
			withBase(run.ShootRequestsPerProbe, base, func(s *SteadyRun) float64 { return s.ShootRequestsPerProbe }, "%.2f"),
			run.ConsistentLeaseListsPerProbe)
	}
	r.writeCaches(b)
}

// writeCaches writes the seed objects the replicas' caches received and kept, when they say.
func (r *Result) writeCaches(b *strings.Builder) {
	var rows []SteadyRun
	for _, run := range r.Steady {
		if len(run.ChurnEventsReceived) > 0 {
			rows = append(rows, run)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\nThe replicas' caches (--cache-sharding=%s, shard selectors %s): the objects they hold, and the watch events they received when every shoot's kubeconfig Secret changed once:\n\n| shoots | replicas | objects held (per replica) | events received (per replica) |\n|---|---|---|---|\n",
		cmp.Or(r.Settings.CacheSharding, "dwd's default"), map[bool]string{true: "applied by the API server", false: "off on the API server"}[r.Settings.ShardSelectors])
	for _, run := range rows {
		fmt.Fprintf(b, "| %d | %d | %s | %s |\n", run.Shoots, run.Replicas, list(run.CacheObjects, "%.0f", 1), list(run.ChurnEventsReceived, "%.0f", 1))
	}
}

// SteadyAt returns the steady run at a load, or nil; r may be nil.
func (r *Result) SteadyAt(shoots, replicas int) *SteadyRun {
	if r == nil {
		return nil
	}
	for i := range r.Steady {
		if r.Steady[i].Shoots == shoots && r.Steady[i].Replicas == replicas {
			return &r.Steady[i]
		}
	}
	return nil
}

// withBase formats v, followed by the baseline's figure in brackets when there is one.
func withBase(v float64, base *SteadyRun, get func(*SteadyRun) float64, format string) string {
	s := fmt.Sprintf(format, v)
	if base != nil {
		s += " (" + fmt.Sprintf(format, get(base)) + ")"
	}
	return s
}

// list formats values divided by unit, comma-separated.
func list(values []float64, format string, unit float64) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = fmt.Sprintf(format, v/unit)
	}
	return strings.Join(parts, ", ")
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func mean(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	total := 0.0
	for _, v := range values {
		total += v
	}
	return total / float64(len(values))
}
