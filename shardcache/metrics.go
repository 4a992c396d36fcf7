package shardcache

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The metrics of the sharded caches, labelled with the sharding group whose share they hold.
var (
	heldPartitions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_cache_share_partitions", Help: "Partitions whose shoots this replica's caches of the group hold: its share and the partitions it holds.",
	}, []string{"group"})
	received = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_cache_objects_received_total",
		Help: "Objects the sharded caches received from the API server, by kind, by how (list, watch, reselect: the list of a new share) and whether they were in the share (kept) or not (dropped: the server does not select, or the cache filters by name).",
	}, []string{"group", "resource", "via", "result"})
	cachedObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_cache_objects", Help: "Objects of the group's share the sharded caches hold, by kind.",
	}, []string{"group", "resource"})
	reselects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_cache_reselects_total", Help: "Changes of a sharded cache to a new share within its watch.",
	}, []string{"group", "resource"})
	selectorIgnored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_cache_shard_selector_ignored_total",
		Help: "Lists answered without the shard selector they were sent, and watch events outside it: the API server does not apply shard selectors (feature gate ShardedListAndWatch), so the cache filters what it receives.",
	}, []string{"group", "resource"})
)

// collectors are the metrics of the sharded caches, registered with controller-runtime's registry.
var collectors = []prometheus.Collector{heldPartitions, received, cachedObjects, reselects, selectorIgnored}

func init() {
	metrics.Registry.MustRegister(collectors...)
}
