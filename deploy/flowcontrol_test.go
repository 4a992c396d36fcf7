package deploy

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// classification is what the API server's priority and fairness filter answered for the last
// request: the UIDs of the FlowSchema and the priority level it put the request in.
type classification struct {
	mu                sync.Mutex
	flowSchema, level string
}

func (c *classification) RoundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := next.RoundTrip(req)
	if err == nil {
		c.mu.Lock()
		c.flowSchema = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
		c.level = resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
		c.mu.Unlock()
	}
	return resp, err
}

func (c *classification) last() (flowSchema, level string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flowSchema, c.level
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestLeaseRequestsOfDwdLandInTheirOwnPriorityLevel applies each build's FlowSchema and priority level
// to the real API server and sends Lease requests as each workload's ServiceAccount: the API server
// must classify them into the build's FlowSchema (its answer names the FlowSchema and the priority
// level it chose), and a request of the same account for anything else into another one, so that
// the check can fail.
func TestLeaseRequestsOfDwdLandInTheirOwnPriorityLevel(t *testing.T) {
	env.Require(t)
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			objs := mustBuild(t, overlay)
			createNamespaces(t, objs)
			schema, level := applyFlowControl(t, objs)
			shards := buildNamespaces(overlay).shards
			for _, w := range workloads(t, objs) {
				seen := &classification{}
				cfg := rest.CopyConfig(env.Config)
				cfg.Impersonate = rest.ImpersonationConfig{
					UserName: "system:serviceaccount:" + w.meta.Namespace + ":" + w.template.Spec.ServiceAccountName,
					Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + w.meta.Namespace, "system:authenticated"},
				}
				cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
					return roundTripperFunc(func(req *http.Request) (*http.Response, error) { return seen.RoundTrip(next, req) })
				})
				cs, err := kubernetes.NewForConfig(cfg)
				require.NoError(t, err)
				// The API server's flow control follows its configuration objects a moment later.
				assert.Eventually(t, func() bool {
					_, _ = cs.CoordinationV1().Leases(shards).Get(context.Background(), "dwd-prober-dwd-0", metav1.GetOptions{})
					fs, pl := seen.last()
					return fs == schema && pl == level
				}, 30*time.Second, 100*time.Millisecond, "%s/%s: a Lease read in %s is classified into FlowSchema %s",
					w.meta.Namespace, w.template.Spec.ServiceAccountName, shards, schema)
				_, _ = cs.CoreV1().ConfigMaps(shards).Get(context.Background(), "anything", metav1.GetOptions{})
				fs, _ := seen.last()
				assert.NotEmpty(t, fs, "the API server names the FlowSchema of every request")
				assert.NotEqual(t, schema, fs, "a ConfigMap read is not dwd's Lease traffic")
			}
		})
	}
}

// applyFlowControl applies the build's PriorityLevelConfiguration and FlowSchema (one of each), for
// real, removes them when the test ends, and returns their UIDs.
func applyFlowControl(t *testing.T, objs []*unstructured.Unstructured) (schema, level string) {
	t.Helper()
	ctx := context.Background()
	for _, kind := range []string{"PriorityLevelConfiguration", "FlowSchema"} {
		var found []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == kind {
				found = append(found, o)
			}
		}
		require.Len(t, found, 1, "one %s in the build", kind)
		obj := found[0].DeepCopy()
		require.NoError(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), fieldOwner, client.ForceOwnership))
		t.Cleanup(func() {
			if err := env.Client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", kind, obj.GetName(), err)
			}
		})
		switch kind {
		case "FlowSchema":
			var fs flowcontrolv1.FlowSchema
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), &fs))
			schema = string(fs.UID)
		default:
			var pl flowcontrolv1.PriorityLevelConfiguration
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), &pl))
			level = string(pl.UID)
		}
	}
	return schema, level
}
