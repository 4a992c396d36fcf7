package prober

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The scaled-down metrics, computed at scrape time by scaledDownCollector. Their Opts are kept as
// literals so that the deploy tests find the names the alert rules read.
var (
	scaledDownOpts = prometheus.GaugeOpts{
		Name: "dwd_shoot_scaled_down",
		Help: "For each shoot namespace this replica owns that has a configured dependent: 1 while one of them carries the meltdown-protection annotation (scaled down by dwd, no scale-up since), whether or not the shoot's probe runs, else 0.",
	}
	scaledDownCountOpts = prometheus.GaugeOpts{
		Name: "dwd_shoots_scaled_down",
		Help: "Shoots this replica owns whose dependents carry the meltdown-protection annotation (scaled down by dwd, no scale-up since), whether or not their probes run.",
	}
	scaledDownDesc      = prometheus.NewDesc(scaledDownOpts.Name, scaledDownOpts.Help, []string{"namespace"}, nil)
	scaledDownCountDesc = prometheus.NewDesc(scaledDownCountOpts.Name, scaledDownCountOpts.Help, nil, nil)
)

// scaledDown is the process's scaled-down collector, registered with the other metrics by
// registerMetrics; each prober of the process adds its source while it runs (see Setup).
var scaledDown = &scaledDownCollector{}

// scaledDownCollector exports dwd_shoot_scaled_down{namespace} and dwd_shoots_scaled_down at scrape
// time from what the dependent caches hold (dependentMarks): every shoot namespace a prober of this
// process owns that has a configured dependent has a series, 1 while one of its dependents carries
// the meltdown marker, else 0. So a shoot left scaled down stays visible when its probe stops (the
// lifecycle rules, a broken Cluster or kubeconfig) or never started here, and its series turns 0 as
// soon as the marker is gone, whoever removed it.
//
// Only the owner of a shoot's partition exports it, though the caches may hold others' dependents too
// (the whole seed with --cache-sharding=off, partitions about to be acquired with a share): a
// sum over the replicas counts each shoot once, each shoot has one series as the other per-shoot
// series do, and it joins the owner's dwd_shoot_last_successful_probe_timestamp_seconds on (member,
// namespace). During a handover, a restart or after a crash a shoot has no exporter until the next
// owner holds its partition; the series at 0 tells a scale-up apart from such a gap, which the rules
// bridge with max_over_time.
//
// Its lock guards only the set of sources.
type scaledDownCollector struct {
	mu      sync.Mutex
	sources map[*scaledDownSource]struct{}
}

// scaledDownSource is one prober's part of the collector. It is a manager.Runnable that adds itself to
// its collector when started and leaves when ctx ends; Setup starts it once the dependents' marks
// have synced, so that a scrape never shows a half-filled cache.
type scaledDownSource struct {
	// Collector is where the source adds itself; defaults to the process's (scaledDown).
	Collector *scaledDownCollector
	// Shoots maps every namespace with a configured dependent to whether one of them carries the
	// meltdown marker (dependentMarks.shoots).
	Shoots func() map[string]bool
	// Owns tells whether this replica owns a namespace (the prober's Ownership).
	Owns func(namespace string) bool
}

// Start adds the source to its collector until ctx ends.
func (s *scaledDownSource) Start(ctx context.Context) error {
	c := s.Collector
	if c == nil {
		c = scaledDown
	}
	c.add(s)
	defer c.remove(s)
	<-ctx.Done()
	return nil
}

func (c *scaledDownCollector) add(s *scaledDownSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sources == nil {
		c.sources = map[*scaledDownSource]struct{}{}
	}
	c.sources[s] = struct{}{}
}

func (c *scaledDownCollector) remove(s *scaledDownSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sources, s)
}

// Describe implements prometheus.Collector.
func (c *scaledDownCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- scaledDownDesc
	ch <- scaledDownCountDesc
}

// Collect implements prometheus.Collector: a series per shoot owned here, 1 when it is scaled down,
// and the count of those at 1.
func (c *scaledDownCollector) Collect(ch chan<- prometheus.Metric) {
	shoots := c.shoots()
	down := 0
	for _, ns := range slices.Sorted(maps.Keys(shoots)) {
		v := 0.0
		if shoots[ns] {
			v, down = 1, down+1
		}
		ch <- prometheus.MustNewConstMetric(scaledDownDesc, prometheus.GaugeValue, v, ns)
	}
	ch <- prometheus.MustNewConstMetric(scaledDownCountDesc, prometheus.GaugeValue, float64(down))
}

// shoots returns the namespaces to export, each mapped to whether it is scaled down: those a source's
// prober owns (a process that runs several probers, as tests do, exports their union).
func (c *scaledDownCollector) shoots() map[string]bool {
	c.mu.Lock()
	sources := slices.Collect(maps.Keys(c.sources))
	c.mu.Unlock()
	owned := map[string]bool{}
	for _, s := range sources {
		for ns, down := range s.Shoots() {
			if s.Owns(ns) {
				owned[ns] = owned[ns] || down
			}
		}
	}
	return owned
}
