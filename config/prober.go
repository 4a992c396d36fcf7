package config

import (
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the prober configuration, applied by SetProberDefaults to unset fields.
const (
	// DefaultProbeInterval is the time between two probes of a cluster.
	DefaultProbeInterval = 10 * time.Second
	// DefaultInitialDelay is the wait before the first probe of a newly probed cluster.
	DefaultInitialDelay = 30 * time.Second
	// DefaultProbeTimeout bounds each call to a shoot's API server.
	DefaultProbeTimeout = 30 * time.Second
	// DefaultBackoffJitterFactor is the jitter applied to the probe interval.
	DefaultBackoffJitterFactor = 0.2
	// DefaultKCMNodeMonitorGraceDuration is the node monitor grace period assumed
	// when a Shoot does not set its own.
	DefaultKCMNodeMonitorGraceDuration = 40 * time.Second
	// DefaultNodeLeaseFailureFraction is the fraction of expired node leases
	// at or above which the dependent resources are scaled down.
	DefaultNodeLeaseFailureFraction = 0.6
	// DefaultScaleInitialDelay is the wait before scaling one resource.
	DefaultScaleInitialDelay = 0 * time.Second
	// DefaultScaleTimeout bounds the scaling of one resource.
	DefaultScaleTimeout = 30 * time.Second
)

// ProberConfig configures the prober: how often and how the shoot clusters
// are probed, and which control-plane resources are scaled down when a
// shoot's nodes cannot reach its API server (and back up when they can).
type ProberConfig struct {
	// KubeConfigSecretName names the Secret in each shoot namespace whose key
	// "kubeconfig" gives access to the shoot's API server.
	KubeConfigSecretName string `json:"kubeConfigSecretName"`
	// ProbeInterval is the time between two probes of a cluster, in [1s, 10m].
	ProbeInterval *metav1.Duration `json:"probeInterval,omitempty"`
	// InitialDelay is the wait before the first probe of a newly probed cluster, in [0, 10m].
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`
	// ProbeTimeout bounds each call to a shoot's API server, in [1s, 5m].
	ProbeTimeout *metav1.Duration `json:"probeTimeout,omitempty"`
	// BackoffJitterFactor is the jitter applied to ProbeInterval, in [0, 1].
	BackoffJitterFactor *float64 `json:"backoffJitterFactor,omitempty"`
	// KCMNodeMonitorGraceDuration is the node monitor grace period of the
	// shoot's kube-controller-manager, unless the Shoot sets its own; in
	// [16s, 10m] (see ClampGracePeriod).
	KCMNodeMonitorGraceDuration *metav1.Duration `json:"kcmNodeMonitorGraceDuration,omitempty"`
	// NodeLeaseFailureFraction is the fraction of expired node leases, in
	// [0.5, 1] (the original accepts (0, 1]; see minNodeLeaseFailureFraction),
	// at or above which the dependent resources are scaled down.
	NodeLeaseFailureFraction *float64 `json:"nodeLeaseFailureFraction,omitempty"`
	// DependentResourceInfos are the resources scaled down and up by the prober.
	DependentResourceInfos []DependentResourceInfo `json:"dependentResourceInfos"`
}

// DependentResourceInfo names one resource in the shoot namespace that the
// prober scales, and how.
type DependentResourceInfo struct {
	// Ref names the resource; it must have a scale subresource.
	Ref *autoscalingv1.CrossVersionObjectReference `json:"ref"`
	// Optional resources may be missing; a missing required one is an error.
	Optional bool `json:"optional"`
	// ScaleUp says when the resource is scaled up.
	ScaleUp *ScaleInfo `json:"scaleUp"`
	// ScaleDown says when the resource is scaled down.
	ScaleDown *ScaleInfo `json:"scaleDown"`
}

// ScaleInfo places one resource in the ordered flow of a scale-up or a
// scale-down.
type ScaleInfo struct {
	// Level orders the flow: resources of a level are scaled together, once
	// every resource of all lower levels has been scaled.
	Level int `json:"level"`
	// InitialDelay is the wait before the resource is scaled, in [0, 10m].
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`
	// Timeout bounds the scaling of the resource, in (0, 10m].
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}
