package prober

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys and values that decide which shoot nodes are candidates for the node-lease probe. They are
// Gardener's and machine-controller-manager's (MCM, machine.sapcloud.io/v1alpha1) own names.
const (
	// AnnotationNotManagedByMCM on a Node marks it as not managed by MCM. MCM itself treats the mere
	// presence of the key as "not managed" (it skips such nodes whatever the value, and writes "1"
	// itself when it finds a node without a Machine); the original dependency-watchdog also checks
	// presence only. dwd does the same, so a node annotated with any value, even "" or "false", is not
	// a candidate. (Gardener's worker health check counts only the value "1"; following MCM is the safer
	// reading: it is the component that acts on the node.)
	AnnotationNotManagedByMCM = "node.machine.sapcloud.io/not-managed-by-mcm"
	// LabelWorkerPool on a Node names its worker pool.
	LabelWorkerPool = "worker.gardener.cloud/pool"
	// MachineNodeLabel on a Machine names the Node it backs.
	MachineNodeLabel = "node"

	// MachinePhaseFailed and MachinePhaseTerminating are Machine phases (status.currentStatus.phase)
	// whose node is not backed by a usable Machine.
	MachinePhaseFailed      = "Failed"
	MachinePhaseTerminating = "Terminating"
	// MachinePhaseInPlaceUpdating and MachinePhaseInPlaceUpdateFailed are the Machine phases MCM sets
	// while it updates a machine in place and when that update failed (also after its timeout).
	MachinePhaseInPlaceUpdating     = "InPlaceUpdating"
	MachinePhaseInPlaceUpdateFailed = "InPlaceUpdateFailed"

	// NodeConditionInPlaceUpdate is the Node condition type MCM maintains during an in-place update
	// (GEP-31); its reason is the step: CandidateForUpdate, SelectedForUpdate, ReadyForUpdate (drained,
	// gardener-node-agent now updates the OS or kubelet and may restart or reboot it), UpdateSuccessful,
	// UpdateFailed.
	NodeConditionInPlaceUpdate = "InPlaceUpdate"
	// InPlaceUpdateReasonReadyForUpdate and InPlaceUpdateReasonUpdateFailed are the reasons of the
	// InPlaceUpdate condition during which a node's kubelet may be down on purpose or broken by the update.
	InPlaceUpdateReasonReadyForUpdate = "ReadyForUpdate"
	InPlaceUpdateReasonUpdateFailed   = "UpdateFailed"
	// LabelNodeUpdateResult is the Node label gardener-node-agent sets after an in-place update, with
	// the value NodeUpdateResultFailed when it failed (before MCM turns the condition to UpdateFailed).
	LabelNodeUpdateResult  = "node.machine.sapcloud.io/update-result"
	NodeUpdateResultFailed = "failed"
)

// MachineInfo is the part of an MCM Machine (machine.sapcloud.io/v1alpha1) in the shoot namespace that
// the candidate rules read.
type MachineInfo struct {
	Name string
	// Node is the Machine's "node" label: the name of the Node it backs.
	Node string
	// Phase is status.currentStatus.phase.
	Phase string
}

// CandidateNodes returns the sorted names of the nodes whose leases the node-lease probe judges.
//
// A node is a candidate when all of these hold:
//   - it is managed by MCM: no AnnotationNotManagedByMCM, whatever its value;
//   - it is healthy: none of its conditions whose type is one of its worker pool's node conditions
//     (pool from LabelWorkerPool; DefaultNodeConditions when the pool is unknown) has status True;
//     False and Unknown do not count;
//   - a Machine whose "node" label names it has a phase other than Failed and Terminating;
//   - it is not in an in-place update: no InPlaceUpdate condition with reason ReadyForUpdate or
//     UpdateFailed (whatever its status, as MCM sets it True for every step), no update-result=failed
//     label, and its backing Machine is not InPlaceUpdating or InPlaceUpdateFailed. Earlier steps
//     (CandidateForUpdate, SelectedForUpdate) leave the kubelet running, so such a node still counts.
//
// The in-place rules come from MCM's v1alpha1 API (the InPlaceUpdate node condition and its reasons,
// the InPlaceUpdating and InPlaceUpdateFailed machine phases, the update-result node label) and from
// Gardener's GEP-31, which asks the watchdog to leave nodes under an in-place update out of its check;
// the original dependency-watchdog excludes the condition reasons ReadyForUpdate and UpdateFailed.
func CandidateNodes(nodes []corev1.Node, machines []MachineInfo, spec ProbeSpec) []string {
	index := indexMachines(machines)
	candidates := make([]string, 0, len(nodes))
	for i := range nodes {
		if exclusion(&nodes[i], index, spec) == "" {
			candidates = append(candidates, nodes[i].Name)
		}
	}
	slices.Sort(candidates)
	return slices.Compact(candidates)
}

// slimNode returns what CandidateNodes reads of a node and nothing more: its name, the labels and
// annotation it looks at, and the type, status and reason of each condition. It is what a probe keeps of
// the nodes between reads; a Node's images alone can take kilobytes.
func slimNode(node *corev1.Node) corev1.Node {
	slim := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
	if v, ok := node.Annotations[AnnotationNotManagedByMCM]; ok {
		slim.Annotations = map[string]string{AnnotationNotManagedByMCM: v}
	}
	for _, key := range []string{LabelWorkerPool, LabelNodeUpdateResult} {
		if v, ok := node.Labels[key]; ok {
			if slim.Labels == nil {
				slim.Labels = make(map[string]string, 2)
			}
			slim.Labels[key] = v
		}
	}
	if len(node.Status.Conditions) > 0 {
		slim.Status.Conditions = make([]corev1.NodeCondition, len(node.Status.Conditions))
		for i, c := range node.Status.Conditions {
			slim.Status.Conditions[i] = corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason}
		}
	}
	return slim
}

// backing is what the Machines of one node say about it.
type backing struct {
	usable  bool // a Machine neither Failed nor Terminating backs the node
	inPlace bool // such a Machine is being updated in place, or its update failed
}

// indexMachines maps node names to their backing, ignoring Machines that back no node.
func indexMachines(machines []MachineInfo) map[string]backing {
	index := make(map[string]backing, len(machines))
	for _, m := range machines {
		if m.Node == "" || m.Phase == MachinePhaseFailed || m.Phase == MachinePhaseTerminating {
			continue
		}
		b := index[m.Node]
		b.usable = true
		b.inPlace = b.inPlace || m.Phase == MachinePhaseInPlaceUpdating || m.Phase == MachinePhaseInPlaceUpdateFailed
		index[m.Node] = b
	}
	return index
}

// exclusion returns why a node is not a candidate, or "" when it is one.
func exclusion(node *corev1.Node, machines map[string]backing, spec ProbeSpec) string {
	b := machines[node.Name]
	switch {
	case hasAnnotation(node, AnnotationNotManagedByMCM):
		return "not managed by machine-controller-manager"
	case !b.usable:
		return "no Machine backs it that is neither Failed nor Terminating"
	case b.inPlace || nodeInPlaceUpdate(node):
		return "in an in-place update"
	case unhealthy(node, poolConditions(node, spec)):
		return "unhealthy"
	}
	return ""
}

// excludedByNode reports whether the node itself, whatever its Machines say, makes it no candidate: the
// rules exclusion applies to the Node and not to its Machines.
func excludedByNode(node *corev1.Node, spec ProbeSpec) bool {
	return hasAnnotation(node, AnnotationNotManagedByMCM) || nodeInPlaceUpdate(node) || unhealthy(node, poolConditions(node, spec))
}

func hasAnnotation(node *corev1.Node, key string) bool {
	_, ok := node.Annotations[key]
	return ok
}

// poolConditions returns the node condition types of the node's worker pool, the defaults when the pool
// is unknown.
func poolConditions(node *corev1.Node, spec ProbeSpec) []string {
	if conditions := spec.WorkerNodeConditions[node.Labels[LabelWorkerPool]]; len(conditions) > 0 {
		return conditions
	}
	return DefaultNodeConditions
}

// unhealthy reports whether one of the given condition types is True on the node.
func unhealthy(node *corev1.Node, conditionTypes []string) bool {
	for _, c := range node.Status.Conditions {
		if c.Status == corev1.ConditionTrue && slices.Contains(conditionTypes, string(c.Type)) {
			return true
		}
	}
	return false
}

// nodeInPlaceUpdate reports whether the node itself shows an in-place update that may stop its kubelet
// or that failed.
func nodeInPlaceUpdate(node *corev1.Node) bool {
	if node.Labels[LabelNodeUpdateResult] == NodeUpdateResultFailed {
		return true
	}
	for _, c := range node.Status.Conditions {
		if string(c.Type) == NodeConditionInPlaceUpdate &&
			(c.Reason == InPlaceUpdateReasonReadyForUpdate || c.Reason == InPlaceUpdateReasonUpdateFailed) {
			return true
		}
	}
	return false
}
