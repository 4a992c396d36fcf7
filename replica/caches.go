package replica

import (
	"context"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/shardcache"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/weeder"
)

// cacheOptions are the seed caches of the roles this replica runs: only what they read, and of a
// role with a share only the share's shoots (docs/caches.md).
func (r *Replica) cacheOptions() (cache.Options, error) {
	byObject := map[client.Object]cache.ByObject{}
	if r.opts.ProberConfig != nil {
		maps.Copy(byObject, prober.CacheOptions(r.opts.ProberConfig))
	}
	if r.opts.WeederConfig != nil {
		weederObjects, err := weeder.CacheOptions(r.opts.WeederConfig)
		if err != nil {
			return cache.Options{}, err
		}
		maps.Copy(byObject, weederObjects)
	}
	return cache.Options{ByObject: byObject, NewInformer: r.newInformer}, nil
}

// shareCaches makes a share for the caches of each role whose group shards them
// (Sharding.CacheSharding server or client). The original's mode caches the whole seed: its leader
// owns every shoot.
func (r *Replica) shareCaches() {
	r.shares = map[Role]*shardcache.Share{}
	if r.opts.LeaderOnly {
		return
	}
	for _, role := range r.opts.Roles() {
		s := r.opts.ShardingFor(role)
		if s.CacheSharding != config.CacheShardingServer && s.CacheSharding != config.CacheShardingClient {
			continue
		}
		partitions := sharding.Partitions{Function: s.PartitionFunction, Count: s.PartitionCount}
		opts := shardcache.Options{Partitions: partitions, Server: s.CacheSharding == config.CacheShardingServer,
			Group: s.GroupName, Log: r.opts.Log.WithName("caches")}
		if role == RoleWeeder {
			// A change of share lists again at times; the weeder must know which states a list gave.
			opts.ListedAnnotation = weeder.ListedAnnotation
		}
		r.shares[role] = shardcache.NewShare(opts)
		if s.CacheSharding == config.CacheShardingServer && !partitions.Selectable() {
			r.log.Info("Warning: --cache-sharding=server needs --partition-function="+config.PartitionFNVRange+"; the caches filter instead",
				"group", s.GroupName)
		}
	}
}

// startShare makes the caches of a group start with the share its member will likely hold
// (sharding.InitialShare), read from the group's Leases, so that they list it while the process
// starts rather than after its first reconcile; a restart is ready sooner. Without the Leases they
// start empty, and the first reconcile names the share.
func (r *Replica) startShare(ctx context.Context, share *shardcache.Share, c kubernetes.Interface, s config.Sharding) {
	ctx, cancel := context.WithTimeout(ctx, s.MemberRenewDeadline)
	defer cancel()
	list, err := c.CoordinationV1().Leases(s.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{leases.GroupLabel: s.GroupName}).String()})
	if err != nil {
		r.log.Info("Could not read the group's Leases: the caches start empty and list the share once the member knows it",
			"group", s.GroupName, "error", err.Error())
		return
	}
	if held := sharding.InitialShare(s.GroupName, s.MemberName, sharding.RingConfigOf(s), list.Items, time.Now()); held != nil {
		share.Hold(held)
	}
}

// shardedKinds are the kinds of the seed caches that hold a share only, with the share: the prober's
// kubeconfig Secrets, Machines and dependents, the weeder's EndpointSlices. Clusters are cached
// whole (trimmed): they are cluster-scoped, so no API server selects them, and a cache that
// filtered them would list every Cluster of the seed at every change of share, which at 5,000
// shoots took 2–4 s, the graceful handover's whole budget (docs/caches.md).
func (r *Replica) shardedKinds() map[schema.GroupKind]*shardcache.Share {
	kinds := map[schema.GroupKind]*shardcache.Share{}
	if share := r.shares[RoleProber]; share != nil {
		kinds[prober.MachineGVK.GroupKind()] = share
		kinds[corev1.SchemeGroupVersion.WithKind("Secret").GroupKind()] = share
		kinds[appsv1.SchemeGroupVersion.WithKind("Deployment").GroupKind()] = share
		kinds[appsv1.SchemeGroupVersion.WithKind("StatefulSet").GroupKind()] = share
	}
	if share := r.shares[RoleWeeder]; share != nil {
		kinds[discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice").GroupKind()] = share
	}
	return kinds
}
