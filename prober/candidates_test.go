package prober

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// candidateSpec has a pool "custom" with its own conditions and a pool "plain" with the defaults.
var candidateSpec = ProbeSpec{
	NodeMonitorGracePeriod: lifecycleDefaultGrace,
	WorkerNodeConditions: map[string][]string{
		"custom": {"Custom", "ReadonlyFilesystem"},
		"plain":  {"DiskPressure", "KernelDeadlock", "NetworkUnavailable", "ReadonlyFilesystem"},
	},
}

// candidateNode is a node of pool "custom" with the given changes applied.
func candidateNode(name string, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelWorkerPool: "custom"}}}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

func withAnnotation(key, value string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Annotations = map[string]string{key: value} }
}

func withPool(pool string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[LabelWorkerPool] = pool }
}

func withoutPool(n *corev1.Node) { delete(n.Labels, LabelWorkerPool) }

func withLabel(key, value string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[key] = value }
}

func withCondition(conditionType string, status corev1.ConditionStatus, reason string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions,
			corev1.NodeCondition{Type: corev1.NodeConditionType(conditionType), Status: status, Reason: reason})
	}
}

func TestCandidateNodeRules(t *testing.T) {
	running := []MachineInfo{{Name: "m", Node: "n", Phase: "Running"}}
	machine := func(phases ...string) []MachineInfo {
		out := make([]MachineInfo, 0, len(phases))
		for i, p := range phases {
			out = append(out, MachineInfo{Name: fmt.Sprintf("m%d", i), Node: "n", Phase: p})
		}
		return out
	}
	const (
		unmanaged = "not managed by machine-controller-manager"
		unbacked  = "no Machine backs it that is neither Failed nor Terminating"
		inPlace   = "in an in-place update"
		unhealthy = "unhealthy"
	)
	tests := []struct {
		name     string
		node     corev1.Node
		machines []MachineInfo
		want     string // exclusion reason, "" for a candidate
	}{
		{"healthy, managed, backed", candidateNode("n"), running, ""},
		{"Ready condition does not matter", candidateNode("n", withCondition("Ready", corev1.ConditionFalse, "")), running, ""},

		{"not-managed annotation 1", candidateNode("n", withAnnotation(AnnotationNotManagedByMCM, "1")), running, unmanaged},
		{"not-managed annotation true", candidateNode("n", withAnnotation(AnnotationNotManagedByMCM, "true")), running, unmanaged},
		{"not-managed annotation empty", candidateNode("n", withAnnotation(AnnotationNotManagedByMCM, "")), running, unmanaged},
		{"not-managed annotation false counts by presence", candidateNode("n", withAnnotation(AnnotationNotManagedByMCM, "false")), running, unmanaged},
		{"other annotation", candidateNode("n", withAnnotation("node.machine.sapcloud.io/trigger-deletion-by-mcm", "true")), running, ""},

		{"pool condition True", candidateNode("n", withCondition("Custom", corev1.ConditionTrue, "")), running, unhealthy},
		{"pool condition False", candidateNode("n", withCondition("Custom", corev1.ConditionFalse, "")), running, ""},
		{"pool condition Unknown", candidateNode("n", withCondition("Custom", corev1.ConditionUnknown, "")), running, ""},
		{"default condition True but not the pool's", candidateNode("n", withCondition("DiskPressure", corev1.ConditionTrue, "")), running, ""},
		{"one of several conditions True", candidateNode("n",
			withCondition("Custom", corev1.ConditionFalse, ""), withCondition("ReadonlyFilesystem", corev1.ConditionTrue, "")), running, unhealthy},
		{"default pool, default condition True", candidateNode("n", withPool("plain"), withCondition("KernelDeadlock", corev1.ConditionTrue, "")), running, unhealthy},
		{"unknown pool uses defaults: default True", candidateNode("n", withPool("gone"), withCondition("NetworkUnavailable", corev1.ConditionTrue, "")), running, unhealthy},
		{"unknown pool uses defaults: custom True", candidateNode("n", withPool("gone"), withCondition("Custom", corev1.ConditionTrue, "")), running, ""},
		{"no pool label uses defaults: default True", candidateNode("n", withoutPool, withCondition("DiskPressure", corev1.ConditionTrue, "")), running, unhealthy},
		{"no pool label uses defaults: default False", candidateNode("n", withoutPool, withCondition("DiskPressure", corev1.ConditionFalse, "")), running, ""},

		{"machine missing", candidateNode("n"), nil, unbacked},
		{"machine of another node", candidateNode("n"), []MachineInfo{{Name: "m", Node: "other", Phase: "Running"}}, unbacked},
		{"machine without node label", candidateNode("n"), []MachineInfo{{Name: "m", Phase: "Running"}}, unbacked},
		{"machine Failed", candidateNode("n"), machine("Failed"), unbacked},
		{"machine Terminating", candidateNode("n"), machine("Terminating"), unbacked},
		{"machine Failed and Terminating", candidateNode("n"), machine("Failed", "Terminating"), unbacked},
		{"machine Pending", candidateNode("n"), machine("Pending"), ""},
		{"machine Available", candidateNode("n"), machine("Available"), ""},
		{"machine Unknown", candidateNode("n"), machine("Unknown"), ""},
		{"machine CrashLoopBackOff", candidateNode("n"), machine("CrashLoopBackOff"), ""},
		{"machine without phase", candidateNode("n"), machine(""), ""},
		{"terminating machine and its replacement", candidateNode("n"), machine("Terminating", "Running"), ""},

		{"in-place ReadyForUpdate", candidateNode("n", withCondition(NodeConditionInPlaceUpdate, corev1.ConditionTrue, "ReadyForUpdate")), running, inPlace},
		{"in-place UpdateFailed", candidateNode("n", withCondition(NodeConditionInPlaceUpdate, corev1.ConditionTrue, "UpdateFailed")), running, inPlace},
		{"in-place ReadyForUpdate, status False", candidateNode("n", withCondition(NodeConditionInPlaceUpdate, corev1.ConditionFalse, "ReadyForUpdate")), running, inPlace},
		{"in-place CandidateForUpdate", candidateNode("n", withCondition(NodeConditionInPlaceUpdate, corev1.ConditionTrue, "CandidateForUpdate")), running, ""},
		{"in-place SelectedForUpdate", candidateNode("n", withCondition(NodeConditionInPlaceUpdate, corev1.ConditionTrue, "SelectedForUpdate")), running, ""},
		{"in-place UpdateSuccessful", candidateNode("n", withCondition(NodeConditionInPlaceUpdate, corev1.ConditionTrue, "UpdateSuccessful")), running, ""},
		{"ReadyForUpdate reason on another condition", candidateNode("n", withCondition("Other", corev1.ConditionTrue, "ReadyForUpdate")), running, ""},
		{"update-result failed label", candidateNode("n", withLabel(LabelNodeUpdateResult, "failed")), running, inPlace},
		{"update-result successful label", candidateNode("n", withLabel(LabelNodeUpdateResult, "successful")), running, ""},
		{"machine InPlaceUpdating", candidateNode("n"), machine("InPlaceUpdating"), inPlace},
		{"machine InPlaceUpdateFailed", candidateNode("n"), machine("InPlaceUpdateFailed"), inPlace},
		{"machine InPlaceUpdateSuccessful", candidateNode("n"), machine("InPlaceUpdateSuccessful"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, exclusion(&tt.node, indexMachines(tt.machines), candidateSpec))
			want := []string{}
			if tt.want == "" {
				want = []string{"n"}
			}
			assert.Equal(t, want, CandidateNodes([]corev1.Node{tt.node}, tt.machines, candidateSpec))
			assert.Equal(t, want, CandidateNodes([]corev1.Node{slimNode(&tt.node)}, tt.machines, candidateSpec), "the node as a probe keeps it")
		})
	}
}

func TestCandidateNodesSortedAndFiltered(t *testing.T) {
	nodes := []corev1.Node{
		candidateNode("c"), candidateNode("a"),
		candidateNode("b", withCondition("Custom", corev1.ConditionTrue, "")),
		candidateNode("d", withAnnotation(AnnotationNotManagedByMCM, "1")),
		candidateNode("e"),
	}
	machines := []MachineInfo{
		{Name: "m-a", Node: "a", Phase: "Running"}, {Name: "m-b", Node: "b", Phase: "Running"},
		{Name: "m-c", Node: "c", Phase: "Running"}, {Name: "m-d", Node: "d", Phase: "Running"},
		{Name: "m-e", Node: "e", Phase: "Failed"},
	}
	assert.Equal(t, []string{"a", "c"}, CandidateNodes(nodes, machines, candidateSpec))
}

func TestCandidateNodesWithoutInput(t *testing.T) {
	assert.Equal(t, []string{}, CandidateNodes(nil, nil, ProbeSpec{}))
	assert.Equal(t, []string{"n"}, CandidateNodes([]corev1.Node{candidateNode("n")}, []MachineInfo{{Node: "n"}}, ProbeSpec{}),
		"an empty spec means default conditions for every pool")
}

func BenchmarkCandidateNodes(b *testing.B) {
	nodes, machines := benchmarkNodes(100)
	b.ReportAllocs()
	for b.Loop() {
		CandidateNodes(nodes, machines, candidateSpec)
	}
}

// benchmarkNodes returns n healthy nodes of pool "plain", each with the default conditions False and
// Ready True, and their Running Machines.
func benchmarkNodes(n int) ([]corev1.Node, []MachineInfo) {
	nodes := make([]corev1.Node, 0, n)
	machines := make([]MachineInfo, 0, n)
	for i := range n {
		name := fmt.Sprintf("shoot--p--s-worker-plain-z1-5d8f7-%05d", i)
		node := candidateNode(name, withPool("plain"), withCondition("Ready", corev1.ConditionTrue, ""))
		for _, c := range DefaultNodeConditions {
			withCondition(c, corev1.ConditionFalse, "")(&node)
		}
		nodes = append(nodes, node)
		machines = append(machines, MachineInfo{Name: "machine-" + name, Node: name, Phase: "Running"})
	}
	return nodes, machines
}
