package prober

import (
	"maps"
	"slices"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Shoot last-operation types and states the lifecycle rules look at (Gardener's values).
const (
	LastOperationTypeCreate     = "Create"
	LastOperationTypeReconcile  = "Reconcile"
	LastOperationTypeRestore    = "Restore"
	LastOperationTypeMigrate    = "Migrate"
	LastOperationStateSucceeded = "Succeeded"
)

// DefaultNodeConditions are the node condition types that make a node unhealthy when True, for a
// worker pool that configures none (machine-controller-manager's own defaults).
var DefaultNodeConditions = []string{"KernelDeadlock", "ReadonlyFilesystem", "DiskPressure", "NetworkUnavailable"}

// ProbeSpec is what a running probe depends on; when it changes, the probe is restarted.
type ProbeSpec struct {
	// NodeMonitorGracePeriod is the Shoot's kube-controller-manager nodeMonitorGracePeriod when it is set
	// and positive, else the prober config's kcmNodeMonitorGraceDuration.
	NodeMonitorGracePeriod time.Duration
	// WorkerNodeConditions maps each worker pool name to the node condition types that make its nodes
	// unhealthy, sorted and without duplicates; DefaultNodeConditions for a pool that configures none.
	WorkerNodeConditions map[string][]string
}

// Equal reports whether two specs would run the same probe. A nil and an empty map are equal.
func (s ProbeSpec) Equal(o ProbeSpec) bool {
	return s.NodeMonitorGracePeriod == o.NodeMonitorGracePeriod &&
		maps.EqualFunc(s.WorkerNodeConditions, o.WorkerNodeConditions, slices.Equal)
}

// Decide returns whether a probe should run for the shoot, the spec it runs with, and why not when it
// should not. The rules are the original's, as a pure function of the Shoot: a running probe and a
// new one obey the same rules, so a probe also stops when a start condition stops holding (for
// example a Restore that is processing again).
//
// In order: no Shoot (the Cluster is gone); a deletionTimestamp; hibernation enabled; a Migrate last
// operation (any state); no workers; waking up (status.isHibernated while hibernation is disabled);
// no last operation; a last operation other than Reconcile (any state) or a Create or Restore that
// Succeeded. Anything else runs.
func Decide(shoot *Shoot, defaultGrace time.Duration) (run bool, spec ProbeSpec, reason string) {
	if _, reason := notRun(shoot); reason != "" {
		return false, ProbeSpec{}, reason
	}
	return true, probeSpecOf(shoot, defaultGrace), ""
}

// Why a shoot is not probed, the bounded values of the reason label of dwd_shoots_not_probed: the
// lifecycle rule that stops its probe (Decide).
const (
	NotProbedGone            = "cluster_gone"
	NotProbedDeleting        = "deleting"
	NotProbedHibernated      = "hibernated"
	NotProbedMigrating       = "migrating"
	NotProbedNoWorkers       = "no_workers"
	NotProbedWakingUp        = "waking_up"
	NotProbedNoLastOperation = "no_last_operation"
	NotProbedLastOperation   = "last_operation" // a Create or Restore not succeeded yet, or another type
)

// UnprotectedInvalidCluster is the reason label of dwd_shoots_unprotected for a shoot whose Cluster
// holds no usable spec.shoot: no rule stops its probe, it cannot run.
const UnprotectedInvalidCluster = "invalid_cluster"

// notRun returns why no probe should run for the shoot, as a bounded label and in words, or two
// empty strings when one should.
func notRun(shoot *Shoot) (label, reason string) {
	switch {
	case shoot == nil:
		return NotProbedGone, "cluster gone"
	case shoot.Metadata.DeletionTimestamp != nil:
		return NotProbedDeleting, "shoot is being deleted"
	case shoot.HibernationEnabled():
		return NotProbedHibernated, "hibernation is enabled"
	case shoot.Status.LastOperation != nil && shoot.Status.LastOperation.Type == LastOperationTypeMigrate:
		return NotProbedMigrating, "shoot is being migrated"
	case len(shoot.Spec.Provider.Workers) == 0:
		return NotProbedNoWorkers, "shoot has no workers"
	case shoot.Status.IsHibernated:
		return NotProbedWakingUp, "shoot is waking up from hibernation"
	case shoot.Status.LastOperation == nil:
		return NotProbedNoLastOperation, "shoot has no last operation"
	}
	if reason := lastOperationReason(shoot.Status.LastOperation); reason != "" {
		return NotProbedLastOperation, reason
	}
	return "", ""
}

// lastOperationReason returns why a last operation does not allow a probe, or "" when it does.
func lastOperationReason(op *LastOperation) string {
	switch op.Type {
	case LastOperationTypeReconcile:
		return ""
	case LastOperationTypeCreate, LastOperationTypeRestore:
		if op.State == LastOperationStateSucceeded {
			return ""
		}
	}
	return "last operation " + op.Type + " is " + op.State
}

// probeSpecOf computes the spec of a shoot that should be probed. A Shoot's own grace period is
// clamped into the bounds the config's is validated against (config.ClampGracePeriod): its owner sets
// it, and a tiny one would have the watchdog scale that healthy shoot down.
func probeSpecOf(shoot *Shoot, defaultGrace time.Duration) ProbeSpec {
	spec := ProbeSpec{NodeMonitorGracePeriod: defaultGrace, WorkerNodeConditions: workerNodeConditions(shoot.Spec.Provider.Workers)}
	if grace, ok := shootGracePeriod(shoot); ok {
		spec.NodeMonitorGracePeriod, _ = config.ClampGracePeriod(grace)
	}
	return spec
}

// shootGracePeriod returns the Shoot's own nodeMonitorGracePeriod when it is set and positive.
func shootGracePeriod(shoot *Shoot) (time.Duration, bool) {
	kcm := shoot.Spec.Kubernetes.KubeControllerManager
	if kcm == nil || kcm.NodeMonitorGracePeriod == nil || kcm.NodeMonitorGracePeriod.Duration <= 0 {
		return 0, false
	}
	return kcm.NodeMonitorGracePeriod.Duration, true
}

// workerNodeConditions maps each worker pool to its sorted, de-duplicated node condition types, with
// the defaults for a pool that lists none. Two workers of the same name (Gardener forbids it) get the
// union of their conditions.
func workerNodeConditions(workers []Worker) map[string][]string {
	out := make(map[string][]string, len(workers))
	for _, w := range workers {
		conditions := DefaultNodeConditions
		if w.MachineControllerManager != nil && len(w.MachineControllerManager.NodeConditions) > 0 {
			conditions = w.MachineControllerManager.NodeConditions
		}
		merged := append(slices.Clone(out[w.Name]), conditions...)
		slices.Sort(merged)
		out[w.Name] = slices.Compact(merged)
	}
	return out
}

// NotProbedOf tells why the prober does not probe the shoot of cluster, as it decides at each of its
// changes (Decide): the bounded label of dwd_shoots_not_probed and the rule in words; two empty
// strings when it probes it. A nil cluster is one that is gone. A Cluster whose spec.shoot cannot be
// decoded is an error: no rule stops its probe, and it cannot run (dwd_shoots_unprotected).
func NotProbedOf(cluster *unstructured.Unstructured) (label, reason string, err error) {
	if cluster == nil {
		label, reason = notRun(nil)
		return label, reason, nil
	}
	shoot, err := shootOf(cluster)
	if err != nil {
		return "", "", err
	}
	label, reason = notRun(shoot)
	return label, reason, nil
}
