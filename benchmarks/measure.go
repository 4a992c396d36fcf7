package benchmarks

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"

	dto "github.com/prometheus/client_model/go"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// snapshot is what the replicas' metrics and the shoot server's counters said at one moment.
type snapshot struct {
	at      time.Time
	metrics map[string]map[string]*dto.MetricFamily // by replica name
	shoots  sim.Stats
}

// snapshot scrapes every running replica and the shoot server.
func (b *bench) snapshot(ctx context.Context) snapshot {
	s := snapshot{at: time.Now(), metrics: map[string]map[string]*dto.MetricFamily{}, shoots: b.seed.Shoots.Stats()}
	for _, r := range b.replicas {
		if m := r.Metrics(ctx); m != nil {
			s.metrics[r.Name] = m
		}
	}
	return s
}

// delta is a counter's (or a sum of counters') increase of one replica between two snapshots.
func delta(a, b snapshot, replica, name, match string) float64 {
	return sim.Sum(b.metrics[replica], name, match) - sim.Sum(a.metrics[replica], name, match)
}

// countersByLabel is the increase of a counter between two snapshots, summed over the replicas in
// both and over the samples whose labels include match, by the value of one label.
func countersByLabel(a, b snapshot, name, match, label string) map[string]float64 {
	by := map[string]float64{}
	add := func(families map[string]*dto.MetricFamily, sign float64) {
		for _, m := range families[name].GetMetric() {
			if !dwdproc.LabelsMatch(m.GetLabel(), sim.SplitMatch(match)...) {
				continue
			}
			value := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					value = l.GetValue()
				}
			}
			by[value] += sign * m.GetCounter().GetValue()
		}
	}
	for replica, m := range b.metrics {
		if _, ok := a.metrics[replica]; ok {
			add(m, 1)
			add(a.metrics[replica], -1)
		}
	}
	for k, v := range by {
		if v == 0 {
			delete(by, k)
		}
	}
	return by
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	upper float64
	count float64
}

// histogramDelta returns the cumulative buckets of a histogram's observations between two
// snapshots, summed over the replicas.
func histogramDelta(a, b snapshot, name string) []bucket {
	counts := map[float64]float64{}
	add := func(families map[string]*dto.MetricFamily, sign float64) {
		f, ok := families[name]
		if !ok {
			return
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			for _, bk := range h.GetBucket() {
				if !math.IsInf(bk.GetUpperBound(), 1) { // the text format lists +Inf, the sample count
					counts[bk.GetUpperBound()] += sign * float64(bk.GetCumulativeCount())
				}
			}
			counts[math.Inf(1)] += sign * float64(h.GetSampleCount())
		}
	}
	for replica, m := range b.metrics {
		if _, ok := a.metrics[replica]; ok {
			add(m, 1)
			add(a.metrics[replica], -1)
		}
	}
	buckets := make([]bucket, 0, len(counts))
	for upper, count := range counts {
		buckets = append(buckets, bucket{upper: upper, count: count})
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].upper < buckets[j].upper })
	return buckets
}

// histogramQuantile estimates the q-quantile of cumulative buckets as Prometheus' histogram_quantile
// does: linearly within the bucket the rank falls in, the first bucket starting at 0; a rank in the
// +Inf bucket gives the highest finite bound. It returns 0 for no observations.
func histogramQuantile(q float64, buckets []bucket) float64 {
	if len(buckets) == 0 || buckets[len(buckets)-1].count <= 0 {
		return 0
	}
	total := buckets[len(buckets)-1].count
	rank := q * total
	lower, below := 0.0, 0.0
	for _, bk := range buckets {
		if bk.count >= rank {
			if math.IsInf(bk.upper, 1) {
				return lower
			}
			if bk.count == below {
				return bk.upper
			}
			return lower + (bk.upper-lower)*(rank-below)/(bk.count-below)
		}
		lower, below = bk.upper, bk.count
	}
	return lower
}

// sampleQuantile is the nearest-rank q-quantile of samples (the largest for q=0.99 and fewer than 100
// samples); 0 for none.
func sampleQuantile(q float64, samples []float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(samples))
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// memberOf returns the replica name in a dwd prober's User-Agent, "dwd-prober/<version> (<member>)".
func memberOf(agent string) string {
	rest, ok := strings.CutPrefix(agent, "dwd-prober/")
	if !ok {
		return ""
	}
	_, member, ok := strings.Cut(rest, " (")
	if !ok {
		return ""
	}
	member, ok = strings.CutSuffix(member, ")")
	if !ok {
		return ""
	}
	return member
}

// ownership is where the ring of a set of live members puts each partition and shoot.
type ownership struct {
	ring       *sharding.Ring
	partitions int
}

func newOwnership(members []string) (*ownership, error) {
	ring, err := sharding.NewRing(members, sharding.DefaultRingConfig())
	if err != nil {
		return nil, err
	}
	return &ownership{ring: ring, partitions: config.DefaultPartitionCount}, nil
}

// owner is the member that should probe a shoot.
func (o *ownership) owner(shoot string) string {
	return o.ring.Owner(o.ring.Partition(shoot))
}

// held is how many partitions each member should hold.
func (o *ownership) held() map[string]int {
	held := map[string]int{}
	for _, m := range o.ring.Members() {
		held[m] = len(o.ring.PartitionsOf(m))
	}
	return held
}
