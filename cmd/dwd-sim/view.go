package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// watch prints what each replica does every few seconds until the returned stop is called: its
// partitions and shoots, probes per second, scale operations and pods weeded.
func (d *demo) watch(ctx context.Context) (stop func()) {
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
func (d *demo) printView(ctx context.Context, probes map[string]float64, since time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-6s %-8s %10s %7s %9s %11s %11s %6s\n", "replica", "state", "partitions", "shoots", "probes/s", "scaled down", "scaled up", "weeded")
	for _, r := range d.replicas {
		m := r.metrics(ctx)
		state := "running"
		if !r.running() {
			state = "killed"
		} else if m == nil {
			state = "starting"
		}
		total := sum(m, "dwd_probes_total", "")
		rate := 0.0
		if prev, ok := probes[r.name]; ok && total >= prev && since > 0 {
			rate = (total - prev) / since.Seconds()
		}
		probes[r.name] = total
		fmt.Fprintf(&b, "  %-7s %-8s %10.0f %7.0f %9.1f %11.0f %11.0f %6.0f\n", r.name, state,
			sum(m, "dwd_sharding_partitions_held", "group="+replicaGroups[0]), sum(m, "dwd_probes_active", ""), rate,
			sum(m, "dwd_scale_operations_total", "direction=down,result=success"),
			sum(m, "dwd_scale_operations_total", "direction=up,result=success"),
			sum(m, "dwd_weeder_pods_deleted_total", ""))
	}
	fmt.Fprint(d.out, b.String())
}
