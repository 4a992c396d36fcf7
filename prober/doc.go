// Package prober checks, for every shoot namespace this replica owns, the shoot's kube-apiserver and
// node leases, and asks the scaler to scale the dependent control-plane components down when too many
// node leases have expired and back up when they recover.
//
// Probes are scheduled on a min-heap of next-run times feeding a bounded worker pool, never a goroutine
// per shoot; seed objects come from filtered informer caches and shoot clients are cached per Secret
// version.
package prober
