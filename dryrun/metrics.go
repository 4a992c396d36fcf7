package dryrun

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The kinds of write Writes counts (label kind).
const (
	// KindScale is a patch of a dependent resource's replicas (with its annotations).
	KindScale = "scale"
	// KindAnnotation is a patch of a dependent resource's annotations only (the end of an interrupted
	// flow, or the leftover replicas annotation of the original).
	KindAnnotation = "annotation"
	// KindPodDelete is the weeder's delete of a pod stuck in CrashLoopBackOff.
	KindPodDelete = "pod_delete"
	// KindEvent is an events.k8s.io Event.
	KindEvent = "event"
)

// The directions of a write (label direction): a scale-down or scale-up, or none for what has none.
const (
	DirectionDown = "down"
	DirectionUp   = "up"
	DirectionNone = "none"
)

var writesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "dwd_dry_run_writes_total",
	Help: "Writes this replica would have sent but did not (--dry-run), by kind (scale, annotation, pod_delete, event) and direction (down, up, none).",
}, []string{"kind", "direction"})

var registerOnce sync.Once

// register registers the metric and starts each of its series at zero, so that a rate of them is 0, not
// no data, before the first write.
func register() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(writesTotal)
		for _, kd := range [][2]string{{KindScale, DirectionDown}, {KindScale, DirectionUp}, {KindAnnotation, DirectionNone},
			{KindPodDelete, DirectionNone}, {KindEvent, DirectionNone}} {
			writesTotal.WithLabelValues(kd[0], kd[1])
		}
	})
}
