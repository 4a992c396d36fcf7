// Package sim simulates a seed and its shoots on one machine, for `make demo` and the load
// benchmarks: the seed is a real kube-apiserver and etcd (built from source by `make tools`) holding,
// per shoot namespace, what Gardener would put there (a Cluster, the kubeconfig Secret, the dependent
// Deployments, Machines, EndpointSlices, control-plane Pods); the shoots' API servers are one HTTPS
// server (ShootServer) that serves every shoot under its own path prefix and whose node leases renew
// like kubelets', with per-shoot scenarios (healthy, meltdown, down, slow, throttled) that can change
// while it runs.
package sim
