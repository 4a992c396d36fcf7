package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultWatchDuration is how long the weeder acts after a service has become ready.
const DefaultWatchDuration = 5 * time.Minute

// WeederConfig configures the weeder: which pods it deletes from
// CrashLoopBackOff once a service they depend on has become ready again.
type WeederConfig struct {
	// WatchDuration is how long the weeder acts after the service has become
	// ready, in (0, 1h].
	WatchDuration *metav1.Duration `json:"watchDuration,omitempty"`
	// ServicesAndDependantSelectors maps the name of a Service to the pods
	// that depend on it.
	ServicesAndDependantSelectors map[string]DependantSelectors `json:"servicesAndDependantSelectors"`
}

// DependantSelectors selects the pods that depend on one service. A pod is
// selected when any one of the selectors matches it.
type DependantSelectors struct {
	// PodSelectors select pods in the namespace of the service.
	PodSelectors []*metav1.LabelSelector `json:"podSelectors"`
}
