package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// RoleRun is one role measured alone: one replica running only that role over every shoot, after it
// became ready and warmed up, for the steady duration. The requests of each role's StatefulSet are
// sized from it (docs/operations.md, "Memory").
type RoleRun struct {
	Role     string  `json:"role"`
	Shoots   int     `json:"shoots"`
	RSSBytes float64 `json:"rss_bytes"`
	// HeapBytes is the Go heap in use at the end (go_memstats_heap_inuse_bytes).
	HeapBytes       float64 `json:"heap_bytes"`
	CPUCores        float64 `json:"cpu_cores"`
	ReadySeconds    float64 `json:"ready_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// roleConfigFlags are the config flags of dwd run, by the role they give a replica.
var roleConfigFlags = map[string]string{"prober": "--prober-config=", "weeder": "--weeder-config="}

// rolesStage measures each role alone at the largest load.
func (b *bench) rolesStage(shoots int) stage {
	return stage{shoots, func(ctx context.Context) error {
		for _, role := range []string{"prober", "weeder"} {
			run, err := b.roleAlone(ctx, shoots, role)
			if err != nil {
				return wrap(scenarioRoles, err)
			}
			b.result.Roles = append(b.result.Roles, run)
		}
		return nil
	}}
}

// argsOfRole are args without the config flags of the roles other than role.
func argsOfRole(args []string, role string) []string {
	return slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		for r, flag := range roleConfigFlags {
			if r != role && strings.HasPrefix(a, flag) {
				return true
			}
		}
		return false
	})
}

// roleAlone runs one replica of role only (its set's args without the other role's config) and
// measures it as steady does.
func (b *bench) roleAlone(ctx context.Context, shoots int, role string) (RoleRun, error) {
	run := RoleRun{Role: role, Shoots: shoots}
	b.stopAll()
	if err := b.ensureShoots(ctx, shoots); err != nil {
		return run, err
	}
	rs := &sim.ReplicaSet{Dwd: b.rs.Dwd, Dir: b.rs.Dir, Pprof: b.rs.Pprof, Command: b.rs.Command}
	rs.Args = argsOfRole(b.rs.Args, role)
	start := time.Now()
	r, err := rs.Start("dwd-" + role + "-only")
	if err != nil {
		return run, err
	}
	b.replicas = append(b.replicas, r)
	defer b.stopAll()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		return r.Ready(ctx), nil
	}); err != nil {
		return run, fmt.Errorf("the %s alone did not become ready: %w", role, err)
	}
	run.ReadySeconds = time.Since(start).Seconds()
	fmt.Fprintf(b.out, "%s alone, %d shoots: ready after %.1fs; warming up %s, measuring %s\n", role, shoots, run.ReadySeconds, b.warmUp(), b.opts.Duration)
	s0, s1, err := b.window(ctx)
	if err != nil {
		return run, err
	}
	if len(s0.metrics) != 1 || len(s1.metrics) != 1 {
		return run, fmt.Errorf("the %s alone did not answer", role)
	}
	run.DurationSeconds = s1.at.Sub(s0.at).Seconds()
	run.CPUCores = delta(s0, s1, r.Name, "process_cpu_seconds_total", "") / run.DurationSeconds
	run.RSSBytes = sim.Sum(s1.metrics[r.Name], "process_resident_memory_bytes", "")
	run.HeapBytes = sim.Sum(s1.metrics[r.Name], "go_memstats_heap_inuse_bytes", "")
	fmt.Fprintf(b.out, "  %s alone: RSS %.0f MiB, heap in use %.0f MiB, CPU %.3f cores\n", role, run.RSSBytes/(1<<20), run.HeapBytes/(1<<20), run.CPUCores)
	return run, nil
}

// writeRoles writes the section of the roles measured alone.
func (r *Result) writeRoles(b *strings.Builder) {
	if len(r.Roles) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Each role alone\n\nOne replica running one role over every shoot (`dwd run` with only that role's config), measured as a steady run after it was ready.\n\n")
	fmt.Fprintf(b, "| role | shoots | ready s | RSS MiB | heap in use MiB | CPU cores |\n|---|---|---|---|---|---|\n")
	for _, x := range r.Roles {
		fmt.Fprintf(b, "| %s | %d | %.1f | %.0f | %.0f | %.3f |\n", x.Role, x.Shoots, x.ReadySeconds, x.RSSBytes/(1<<20), x.HeapBytes/(1<<20), x.CPUCores)
	}
}
