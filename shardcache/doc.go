// Package shardcache makes a replica's seed caches hold only the shoots of its share: the informers
// of the kinds a role reads (Clusters, kubeconfig Secrets, Machines, dependent Deployments,
// EndpointSlices) list and watch the namespaces of the partitions the replica's coordinator sets
// (Share.Hold), asking the API server for them with a shard selector (Kubernetes 1.36, feature gate
// ShardedListAndWatch) where it may, and dropping what falls outside the share where the server
// ignores the selector or cannot select (Clusters, by name). A change of the share happens within
// each informer's watch: one list of the new share, the difference sent as events, and the watch
// goes on with the new selector. The coordinator acquires a partition only once every informer
// holds it (Share.Warm). docs/caches.md says how the caches are built and why.
package shardcache
