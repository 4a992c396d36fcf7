package demo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// watch prints what each replica does every few seconds until the returned stop is called: its
// partitions and shoots, probes per second, scale operations and pods weeded.
func (d *Demo) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		ticker := time.NewTicker(3 * time.Second)
		defer ticker.Stop()
		probes := map[string]float64{}
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-ticker.C:
				d.printView(ctx, probes, now.Sub(last))
				last = now
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// printView prints one line per replica.
func (d *Demo) printView(ctx context.Context, probes map[string]float64, since time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-6s %-8s %10s %7s %9s %11s %11s %6s\n", "replica", "state", "partitions", "shoots", "probes/s", "scaled down", "scaled up", "weeded")
	for _, r := range d.Replicas {
		m := r.Metrics(ctx)
		state := "running"
		if !r.Running() {
			state = "killed"
		} else if m == nil {
			state = "starting"
		}
		total := sim.Sum(m, "dwd_probes_total", "")
		rate := 0.0
		if prev, ok := probes[r.Name]; ok && total >= prev && since > 0 {
			rate = (total - prev) / since.Seconds()
		}
		probes[r.Name] = total
		fmt.Fprintf(&b, "  %-7s %-8s %10.0f %7.0f %9.1f %11.0f %11.0f %6.0f\n", r.Name, state,
			sim.Sum(m, "dwd_sharding_partitions_held", "group="+sim.Groups[0]), sim.Sum(m, "dwd_probes_active", ""), rate,
			sim.Sum(m, "dwd_scale_operations_total", "direction=down,result=success"),
			sim.Sum(m, "dwd_scale_operations_total", "direction=up,result=success"),
			sim.Sum(m, "dwd_weeder_pods_deleted_total", ""))
	}
	fmt.Fprint(d.Out, b.String())
}
