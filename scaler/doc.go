// Package scaler plans and executes level-ordered scale flows on the scale subresource of the dependent
// resources (kube-controller-manager, machine-controller-manager, cluster-autoscaler, ...), keeping the
// original's replicas, meltdown-protection and ignore-scaling annotations.
//
// Planning is pure: a plan is computed from the config alone. Execution uses optimistic concurrency so
// that a late write from a replica that lost the shoot fails instead of overriding the new owner.
package scaler
