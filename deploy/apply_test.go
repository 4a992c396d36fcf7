package deploy

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

// fieldOwner applies the test's dry runs.
const fieldOwner = client.FieldOwner("dwd-test")

// warnings collects the warnings the API server answers with.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns the warnings collected since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.list
	w.list = nil
	return list
}

// warningClient is a client of the test API server whose warnings land in the returned collector.
func warningClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	return c, w
}

// dryRunApply applies obj server-side without persisting it, as `kubectl apply --server-side
// --dry-run=server` does.
func dryRunApply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.DryRunAll, fieldOwner, client.ForceOwnership)
}

// deployCRDs installs the test copies of the CRDs of what deploy/ ships beside dwd once per test
// binary (test.DeployCRDs): the package's API server starts with dwd's CRDs only.
var deployCRDs = sync.OnceValue(func() error {
	crds, err := test.DeployCRDs()
	if err != nil {
		return err
	}
	_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds})
	return err
})

// requireDeployCRDs makes the test API server serve the custom resources deploy/ ships.
func requireDeployCRDs(t *testing.T) {
	t.Helper()
	env.Require(t)
	require.NoError(t, deployCRDs())
}

func TestEveryObjectAppliesToTheAPIServer(t *testing.T) {
	requireDeployCRDs(t)
	ctx := context.Background()
	c, warned := warningClient(t)
	for name, objs := range testBuilds(t) {
		t.Run(name, func(t *testing.T) {
			createNamespaces(t, objs)
			createPriorityClasses(t, objs)
			warned.take()
			for _, o := range objs {
				assert.NoError(t, dryRunApply(ctx, c, o), "%s %s", o.GetKind(), o.GetName())
				assert.Empty(t, warned.take(), "%s %s: the API server warns", o.GetKind(), o.GetName())
			}
		})
	}
}

func TestTheAPIServerWarnsOfAPodOutsideTheRestrictedStandard(t *testing.T) {
	env.Require(t)
	objs := mustBuild(t, "overlays/sharded")
	createNamespaces(t, objs)
	c, warned := warningClient(t)
	for _, o := range objs {
		if o.GetKind() != "StatefulSet" {
			continue
		}
		loose := o.DeepCopy()
		unstructured.RemoveNestedField(loose.Object, "spec", "template", "spec", "securityContext")
		containers, _, err := unstructured.NestedSlice(loose.Object, "spec", "template", "spec", "containers")
		require.NoError(t, err)
		for _, ct := range containers {
			delete(ct.(map[string]any), "securityContext")
		}
		require.NoError(t, unstructured.SetNestedSlice(loose.Object, containers, "spec", "template", "spec", "containers"))
		warned.take()
		require.NoError(t, dryRunApply(context.Background(), c, loose))
		list := warned.take()
		require.NotEmpty(t, list, "Pod Security admission warns, so the check above can fail")
		assert.Contains(t, strings.Join(list, "\n"), "restricted")
	}
}

// createNamespaces creates the namespaces the objects go to (the pods', and the Leases' when it is
// another): each from the build's Namespace when it has one, so that what is applied into it meets
// that Namespace's labels, else one that warns of pods outside the restricted Pod Security Standard,
// as the overlays' own do. It keeps a namespace that exists: the test API server never finishes
// deleting one.
func createNamespaces(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	fromBuild := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			fromBuild[o.GetName()] = o
		}
	}
	names := map[string]bool{}
	for _, o := range objs {
		if !clusterScoped[o.GetKind()] {
			names[o.GetNamespace()] = true
		}
	}
	require.NotEmpty(t, names, "the build has namespaced objects")
	for name := range names {
		require.NotEmpty(t, name, "every namespaced object has its namespace")
		var ns client.Object = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"pod-security.kubernetes.io/warn": "restricted"}}}
		if o, ok := fromBuild[name]; ok {
			ns = o.DeepCopy()
		}
		createIfAbsent(t, ns)
	}
}

// createPriorityClasses creates the PriorityClasses the workloads' pods name, which a real seed has.
func createPriorityClasses(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, w := range workloads(t, objs) {
		if name := w.template.Spec.PriorityClassName; name != "" {
			createIfAbsent(t, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 999998800})
		}
	}
}

func createIfAbsent(t *testing.T, obj client.Object) {
	t.Helper()
	err := env.Client.Create(context.Background(), obj)
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "creating %s", obj.GetName())
	}
}
