package sim

import (
	"strings"
	"time"
)

// ProberConfig is a prober config for the simulated seed: its kubeconfig Secret and its dependents,
// scaled in Gardener's levels, with short timings (probe every 2 s, grace period 40 s) so that a
// meltdown is decided within a minute. The demo and the benchmarks run it; ProberConfigWith changes
// its timings.
const ProberConfig = `kubeConfigSecretName: ` + KubeconfigSecretName + `
probeInterval: 2s
initialDelay: 2s
probeTimeout: 5s
kcmNodeMonitorGraceDuration: 40s
nodeLeaseFailureFraction: 0.6
dependentResourceInfos:
  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 0}
    scaleDown: {level: 1}
  - ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 1, initialDelay: 2s}
    scaleDown: {level: 0}
  - ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
    optional: true
    scaleUp: {level: 2}
    scaleDown: {level: 0}
`

// ProberConfigWith is ProberConfig with another probe interval, probe timeout, grace period
// (kcmNodeMonitorGraceDuration) and scale-up delay of machine-controller-manager.
func ProberConfigWith(interval, probeTimeout, grace, mcmScaleUpDelay time.Duration) string {
	return strings.NewReplacer(
		"probeInterval: 2s", "probeInterval: "+interval.String(),
		"probeTimeout: 5s", "probeTimeout: "+probeTimeout.String(),
		"kcmNodeMonitorGraceDuration: 40s", "kcmNodeMonitorGraceDuration: "+grace.String(),
		"scaleUp: {level: 1, initialDelay: 2s}", "scaleUp: {level: 1, initialDelay: "+mcmScaleUpDelay.String()+"}",
	).Replace(ProberConfig)
}

// WeederConfig is a weeder config for the simulated seed: crash-looping kube-apiservers are restarted
// when etcd-main-client turns ready, the other control-plane pods when kube-apiserver does, within a
// watch of 30 s.
const WeederConfig = `watchDuration: 30s
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors:
      - matchExpressions:
          - {key: gardener.cloud/role, operator: In, values: [controlplane]}
          - {key: role, operator: In, values: [apiserver]}
  kube-apiserver:
    podSelectors:
      - matchExpressions:
          - {key: gardener.cloud/role, operator: In, values: [controlplane]}
          - {key: role, operator: NotIn, values: [main, apiserver]}
`

// ExpiredAge and ExpiredFraction are when ProberConfig (and ProberConfigWith at the same grace) counts
// a shoot's leases expired: 0.75 × its kcmNodeMonitorGraceDuration of 40 s, and its
// nodeLeaseFailureFraction.
const (
	ExpiredAge      = 30 * time.Second
	ExpiredFraction = 0.6
)

// ScaleDownDue is when the leases of a melted shoot had aged enough for a scale-down by ProberConfig
// (ExpiredAge, ExpiredFraction); the zero time when the shoot is not melted.
func (s *ShootServer) ScaleDownDue(name string) time.Time {
	at, _ := s.ExpiredSince(name, ExpiredAge, ExpiredFraction)
	return at
}
