// Package explain answers, read-only and in one report, what dwd does with one shoot namespace and why
// (`dwd explain`, also `kubectl dwd explain`): whether the prober probes the shoot and, if not, the
// rule that stops it; the shoot's partition in each sharding group, the member holding it and that
// member's state (or the leader of the original's mode); the dependent resources with their replicas
// and dwd's annotations; and the last Events of the scaler and the prober on the namespace.
//
// It reads through a client of the seed: the Cluster, the kubeconfig Secret's metadata (never its
// data), the groups' Leases, the dependents and the namespace's events.k8s.io Events. A part that
// cannot be read (forbidden, not served) is reported as that part's error; the rest is still shown.
//
// It sits beside replica, above the roles and sharding: only the commands import it.
package explain
