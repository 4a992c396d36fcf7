package sim

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/ptr"
)

const (
	// nodeLeaseNamespace holds the kubelets' node leases.
	nodeLeaseNamespace = "kube-node-lease"
	// leaseDurationSeconds is the kubelet's default node lease duration.
	leaseDurationSeconds = 40
	// workerPoolLabel and workerPool put every simulated node into one Gardener worker pool.
	workerPoolLabel = "worker.gardener.cloud/pool"
	workerPool      = "pool-a"
)

// The types of the lists the shoots answer.
var (
	nodeListType  = runtime.TypeMeta{APIVersion: "v1", Kind: "NodeList"}
	leaseListType = runtime.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "LeaseList"}
)

// versionJSON is the answer to GET /version, the same for every shoot.
var versionJSON = mustMarshal(version.Info{
	Major:        "1",
	Minor:        "36",
	GitVersion:   "v1.36.3",
	GitCommit:    "0000000000000000000000000000000000000000",
	GitTreeState: "clean",
	BuildDate:    "2026-01-01T00:00:00Z",
	GoVersion:    "go1.26.0",
	Compiler:     "gc",
	Platform:     "linux/amd64",
})

// node is a Node Ready in pool-a since created, listing images container images.
func node(name string, created time.Time, images int) *corev1.Node {
	since := metav1.NewTime(created)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{workerPoolLabel: workerPool}, CreationTimestamp: since},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: since, LastTransitionTime: since,
		}}},
	}
	for i := range images {
		repo := fmt.Sprintf("europe-docker.pkg.dev/gardener-project/releases/component-%d", i)
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("%s@sha256:%064x", repo, i+1), fmt.Sprintf("%s:v1.%d.0", repo, i)},
			SizeBytes: int64(20+i) << 20,
		})
	}
	return n
}

// nodeLease is the node lease of name (a node's, or an extra one), renewed at renew.
func nodeLease(name string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nodeLeaseNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds),
			RenewTime: ptr.To(metav1.NewMicroTime(renew)),
		},
	}
}

// nodeRun encodes Nodes of the names, created at created, each listing images container images.
func nodeRun(enc encoding, names []string, created time.Time, images int) *itemRun {
	r := &itemRun{}
	for _, name := range names {
		r.add(enc, node(name, created, images))
	}
	return r
}

// extraName is the name of the i-th extra Lease or Node: no node of a simulated shoot has it.
func extraName(kind string, i int) string {
	return fmt.Sprintf("extra-%s-%d", kind, i)
}

// extraNodes are a scenario's ExtraNodes, encoded the first time a list asks for them.
type extraNodes struct {
	once [encodings]sync.Once
	runs [encodings]*itemRun
}

// run returns the n extra Nodes, created at created, in the encoding.
func (e *extraNodes) run(enc encoding, n int, created time.Time) *itemRun {
	e.once[enc].Do(func() {
		r := &itemRun{}
		for i := range n {
			r.add(enc, node(extraName("node", i), created, 0))
		}
		e.runs[enc] = r
	})
	return e.runs[enc]
}

// extraLeases are a scenario's ExtraLeases, encoded for the last renew instant asked for. They all
// renew at once, so each encoding is redone once per renew interval at most (while one moment is
// asked for), not per request.
type extraLeases struct {
	mu      sync.Mutex
	renewed time.Time
	runs    [encodings]*itemRun
}

// run returns the n extra Leases renewed at renewed, in the encoding.
func (e *extraLeases) run(enc encoding, n int, renewed time.Time) *itemRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.renewed.Equal(renewed) {
		e.renewed, e.runs = renewed, [encodings]*itemRun{}
	}
	if e.runs[enc] == nil {
		r := &itemRun{}
		for i := range n {
			r.add(enc, nodeLease(extraName("lease", i), renewed))
		}
		e.runs[enc] = r
	}
	return e.runs[enc]
}

// statusJSON encodes a failure Status as the API server sends it.
func statusJSON(code int, reason metav1.StatusReason, message string) []byte {
	return mustMarshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: reason, Code: int32(code),
	})
}

// throttledJSON is the answer to every request of a Throttled shoot: the Status of
// apierrors.NewTooManyRequests, whose details repeat the Retry-After header, so that
// apierrors.SuggestsClientDelay finds it.
func throttledJSON(retryAfterSeconds int) []byte {
	return mustMarshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: "Too many requests, please try again later.",
		Reason: metav1.StatusReasonTooManyRequests, Code: http.StatusTooManyRequests,
		Details: &metav1.StatusDetails{RetryAfterSeconds: int32(retryAfterSeconds)},
	})
}

// protobufContentType is the API server's protobuf media type, which kube clients (and dwd) ask for
// first.
const protobufContentType = "application/vnd.kubernetes.protobuf"
