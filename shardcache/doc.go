// Package shardcache makes a replica's seed caches hold only the shoots of its share: the informers
// of the namespaced kinds a role reads (kubeconfig Secrets, Machines, dependent Deployments and
// StatefulSets, EndpointSlices) list and watch the namespaces of the partitions the replica's
// coordinator sets (Share.Hold), asking the API server for them with a shard selector (Kubernetes
// 1.36, feature gate ShardedListAndWatch) where it may, and dropping what falls outside the share
// where the server ignores the selector. A change of share happens within each informer's watch:
// the objects of the partitions that left are deleted, those of the partitions that came are listed
// and watched beside the first watch. The coordinator acquires a partition only once every informer
// holds it (Share.Warm). docs/caches.md says how the caches are built and why.
package shardcache
