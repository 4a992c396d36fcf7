// Package sim simulates a seed and its shoots on one machine, for `make demo` and the load
// benchmarks: the seed is a real kube-apiserver and etcd (built from source by `make tools`) holding,
// per shoot namespace, what Gardener would put there (a Cluster, the kubeconfig Secret, the dependent
// Deployments, Machines, EndpointSlices, control-plane Pods); the shoots' API servers are one HTTPS
// server (ShootServer) that serves every shoot under its own path prefix.
//
// The shoots' node leases renew like kubelets', each every RenewInterval on its own schedule, so a
// healthy lease is between 0 and one interval old when it is served. A melted kubelet stops at its last
// renewal and stays there, across scenario changes, until a scenario lets it run again; it then renews
// at its next renew instant, so no read ever shows a renewal made while it was stopped. Per-shoot
// scenarios, which can
// change while the server runs, play the faults a prober must act on (Meltdown), must survive (Down,
// Slow, Throttled) and must not be fooled by: a watch cache that lags (StaleCache: lists with a
// resourceVersion are stale, consistent ones fresh), a body delivered long after it was served
// (SlowBody), kubelet and API server clocks that are off (NodeClockOffset, ServerClockOffset), and
// lists a tenant has filled (ExtraLeases, ExtraNodes). Lists honour limit and continue on consistent
// reads as kube-apiserver does, and ignore limit on resourceVersion=0 reads as its watch cache does;
// Stats counts consistent and cached reads apart. Every answer carries a Date header.
//
// On the seed run real dwd processes: a ReplicaSet starts Replicas (`dwd run`, or the original's
// `dwd prober` and `dwd weeder` command lines) that share its flags, each logging to a file of its own
// and, with ProxyTo, reaching the seed's API server through a proxy of its own (test.Proxy) that
// Replica.Cut cuts. A Replica keeps its name and ports across restarts, as a StatefulSet's Pod does:
// it can be killed (SIGKILL), terminated (SIGTERM), paused (SIGSTOP) and resumed, restarted with the
// same flags or, as in a rolling update, with others (RestartWith), asked whether it is ready, and
// scraped (Sum); StartAs starts a second process under a running replica's name. With Audit, every
// process gets an audit log of its own, which AuditLogs lists. A Replica's lock guards its current
// process, so that a sampler may scrape it while a scenario restarts it. Seed.Grant runs the replicas
// under exactly the RBAC of a deploy/ overlay (OverlayGrants) or of any ServiceAccount's roles, by
// impersonation. The demo, the benchmarks, the end-to-end tests and the chaos suite (test/chaos) share
// these pieces.
package sim
