package scaler

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// job is the scaling of one resource within a flow.
type job struct {
	namespace string
	info      config.DependentResourceInfo
	dir       Direction
	why       Reason
	log       logr.Logger
}

func newJob(log logr.Logger, namespace string, info config.DependentResourceInfo, dir Direction, why Reason) job {
	j := job{namespace: namespace, info: info, dir: dir, why: why}
	j.log = log.WithValues("resource", klog.KRef(namespace, j.name()), "kind", j.kind())
	return j
}

func (j job) name() string {
	if j.info.Ref == nil {
		return ""
	}
	return j.info.Ref.Name
}

func (j job) kind() string {
	if j.info.Ref == nil {
		return ""
	}
	return j.info.Ref.Kind
}

func (j job) key() client.ObjectKey {
	return client.ObjectKey{Namespace: j.namespace, Name: j.name()}
}

// String names the resource in errors, e.g. "Deployment shoot--p--s/kube-controller-manager".
func (j job) String() string {
	return fmt.Sprintf("%s %s/%s", j.kind(), j.namespace, j.name())
}

// initialDelay and timeout return the configured durations of the job's direction.
func (j job) initialDelay() time.Duration {
	if d := scaleInfoOf(j.info, j.dir).InitialDelay; d != nil {
		return d.Duration
	}
	return config.DefaultScaleInitialDelay
}

func (j job) timeout() time.Duration {
	if d := scaleInfoOf(j.info, j.dir).Timeout; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return config.DefaultScaleTimeout
}

// action is what scaling one resource did.
type action int

const (
	// skipped: nothing to scale (missing optional resource, ignored, already scaled); an ignored
	// resource may still have had its meltdown marker removed.
	skipped action = iota
	// scaled: the replicas were changed.
	scaled
	// completed: the replicas were already right and only the annotations left by an interrupted flow
	// were removed.
	completed
)

// outcome is the result of scaling one resource: the decision taken on the resource as last read, or
// written when the write succeeded.
type outcome struct {
	decision
	obj client.Object // nil when the resource is missing or could not be read
}

// result is the metrics result of the outcome.
func (o outcome) result() string {
	if o.action == skipped {
		return resultSkipped
	}
	return resultSuccess
}
