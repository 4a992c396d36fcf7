package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
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
	// retryAfterSeconds is how long a Throttled shoot asks its clients to wait.
	retryAfterSeconds = 1
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

// nodeListJSON encodes the NodeList of a shoot: every node Ready in pool-a since created.
func nodeListJSON(nodes []string, created time.Time) []byte {
	return mustMarshal(nodeList(nodes, created))
}

func nodeList(nodes []string, created time.Time) *corev1.NodeList {
	since := metav1.NewTime(created)
	list := &corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
	list.Items = make([]corev1.Node, len(nodes))
	for i, name := range nodes {
		list.Items[i] = corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{workerPoolLabel: workerPool}, CreationTimestamp: since},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "kubelet is posting ready status", LastHeartbeatTime: since, LastTransitionTime: since,
			}}},
		}
	}
	return list
}

// leaseListJSON encodes the node LeaseList of a shoot at now: the first expired leases were renewed
// at now - expiredAge, the others at now.
func leaseListJSON(nodes []string, expired int, now time.Time, expiredAge time.Duration) []byte {
	return mustMarshal(leaseList(nodes, expired, now, expiredAge))
}

func leaseList(nodes []string, expired int, now time.Time, expiredAge time.Duration) *coordinationv1.LeaseList {
	fresh, old := metav1.NewMicroTime(now), metav1.NewMicroTime(now.Add(-expiredAge))
	list := &coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "LeaseList"}}
	list.Items = make([]coordinationv1.Lease, len(nodes))
	for i := range nodes {
		renew := &fresh
		if i < expired {
			renew = &old
		}
		list.Items[i] = coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: nodes[i], Namespace: nodeLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: &nodes[i], LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds), RenewTime: renew,
			},
		}
	}
	return list
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
var throttledJSON = mustMarshal(metav1.Status{
	TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
	Status:   metav1.StatusFailure, Message: "Too many requests, please try again later.",
	Reason: metav1.StatusReasonTooManyRequests, Code: http.StatusTooManyRequests,
	Details: &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds},
})

// mustMarshal encodes v, which is one of the API types above and cannot fail to encode.
func mustMarshal(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// templateTime stands for every renewTime in a leaseTemplate. Its text cannot occur elsewhere in a
// LeaseList: node names are lowercase DNS names, without ':' or 'T'.
var templateTime = time.Date(1, 2, 3, 4, 5, 6, 789000, time.UTC)

// leaseTemplate is a shoot's LeaseList, encoded once by leaseListJSON and cut at every renewTime, so
// that a request only writes the times in: encoding the list per request costs ~35µs for 10 nodes.
type leaseTemplate struct {
	parts [][]byte // parts[i] comes before the renewTime of lease i; the last one ends the list
	size  int      // the length of all parts
}

func newLeaseTemplate(nodes []string) leaseTemplate {
	text := templateTime.Format(metav1.RFC3339Micro)
	parts := bytes.Split(leaseListJSON(nodes, 0, templateTime, 0), []byte(text))
	if len(parts) != len(nodes)+1 {
		panic(fmt.Sprintf("lease template: %d renewTimes for %d nodes", len(parts)-1, len(nodes)))
	}
	t := leaseTemplate{parts: parts}
	for _, p := range parts {
		t.size += len(p)
	}
	return t
}

// render returns what leaseListJSON returns for the template's nodes and the same arguments.
func (t leaseTemplate) render(expired int, now time.Time, expiredAge time.Duration) []byte {
	var freshBuf, oldBuf [len(metav1.RFC3339Micro)]byte
	fresh := now.UTC().AppendFormat(freshBuf[:0], metav1.RFC3339Micro)
	old := now.Add(-expiredAge).UTC().AppendFormat(oldBuf[:0], metav1.RFC3339Micro)
	out := make([]byte, 0, t.size+(len(t.parts)-1)*len(fresh))
	for i, part := range t.parts[:len(t.parts)-1] {
		out = append(out, part...)
		if i < expired {
			out = append(out, old...)
		} else {
			out = append(out, fresh...)
		}
	}
	return append(out, t.parts[len(t.parts)-1]...)
}

// protobufContentType is the API server's protobuf media type, which kube clients (and dwd) ask for
// first.
const protobufContentType = "application/vnd.kubernetes.protobuf"

// protobufCodec encodes the lists as the API server does for a client that accepts protobuf.
var protobufCodec = func() *protobuf.Serializer {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(coordinationv1.AddToScheme(scheme))
	return protobuf.NewSerializer(scheme, scheme)
}()

// mustProtobuf encodes a list, which has its TypeMeta set, in the API server's protobuf envelope.
func mustProtobuf(obj runtime.Object) []byte {
	var buf bytes.Buffer
	if err := protobufCodec.Encode(obj, &buf); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// nodeListProtobuf is nodeListJSON's list in protobuf.
func nodeListProtobuf(nodes []string, created time.Time) []byte {
	return mustProtobuf(nodeList(nodes, created))
}

// leaseListProtobuf is leaseListJSON's list in protobuf.
func leaseListProtobuf(nodes []string, expired int, now time.Time, expiredAge time.Duration) []byte {
	return mustProtobuf(leaseList(nodes, expired, now, expiredAge))
}
