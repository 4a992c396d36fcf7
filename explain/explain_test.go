package explain

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/prober"
)

func fakeReader(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.Reader {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

func options(now time.Time) Options {
	return Options{Shoot: "shoot--p--a", ShardNamespace: "garden", Groups: []string{"dwd-prober"}, LeaderNamespace: "garden",
		LeaderLeases: map[string]string{"dwd-prober": "dwd-prober-leader-election"}, Events: 5, Now: now,
		Prober: &config.ProberConfig{KubeConfigSecretName: "kubeconfig"}}
}

// A Cluster whose shoot cannot be decoded is named as such (the shoot is unprotected), a read the seed
// forbids names the permission, and the owner of a group without Leases is the original's leader.
func TestAPartThatCannotBeReadIsShownAsSuch(t *testing.T) {
	now := time.Now()
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"})
	cluster.SetName("shoot--p--a")
	cluster.Object["spec"] = map[string]any{"shoot": map[string]any{"spec": "not an object"}}
	leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "dwd-prober-leader-election"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("original-0"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-5 * time.Second)))}}
	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok && m.Kind == "Secret" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, nil)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	e, err := Explain(context.Background(), fakeReader(t, forbidden, cluster, leader), options(now))
	require.NoError(t, err)
	assert.Equal(t, prober.UnprotectedInvalidCluster, e.Lifecycle)
	assert.Contains(t, e.NotProbed, "the shoot is unprotected")
	assert.Equal(t, "forbidden: needs get on secrets in shoot--p--a", e.KubeconfigSecret.Error)
	require.Len(t, e.Owners, 1)
	assert.Equal(t, "garden/dwd-prober-leader-election", e.Owners[0].Leader)
	assert.Equal(t, "original-0", e.Owners[0].Holder)
	assert.True(t, e.Owners[0].Owned)

	var out bytes.Buffer
	require.NoError(t, e.WriteTable(&out))
	assert.Contains(t, out.String(), "Kubeconfig   Secret kubeconfig: unknown: forbidden: needs get on secrets in shoot--p--a")
	assert.Contains(t, out.String(), "the original's mode, leader lease garden/dwd-prober-leader-election held by original-0 (live)")
}

// No Cluster: the shoot is not probed, and the report says so first.
func TestAShootWithoutAClusterIsNotProbed(t *testing.T) {
	e, err := Explain(context.Background(), fakeReader(t, interceptor.Funcs{}), options(time.Now()))
	require.NoError(t, err)
	assert.False(t, e.Probed)
	assert.Equal(t, prober.NotProbedGone, e.Lifecycle)
	assert.Equal(t, "cluster gone", e.NotProbed)
	assert.Contains(t, e.Owners[0].Error, "no Leases of group dwd-prober in namespace garden, and no leader lease garden/dwd-prober-leader-election")
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{-time.Second: "0s", 45 * time.Second: "45s", 3 * time.Minute: "3m", 5 * time.Hour: "5h", 72 * time.Hour: "3d"} {
		assert.Equal(t, want, age(d), d)
	}
}

// healthyCluster is the Cluster of a shoot that no lifecycle rule stops.
func healthyCluster() *unstructured.Unstructured {
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"})
	cluster.SetName("shoot--p--a")
	cluster.Object["spec"] = map[string]any{"shoot": map[string]any{
		"spec":   map[string]any{"provider": map[string]any{"workers": []any{map[string]any{"name": "a"}}}},
		"status": map[string]any{"lastOperation": map[string]any{"type": "Reconcile", "state": "Succeeded"}}}}
	return cluster
}

// noSecretData fails every read of a Secret's data: explain reads its metadata only.
var noSecretData = interceptor.Funcs{
	Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return errors.New("a Secret's data was read")
		}
		return c.Get(ctx, key, obj, opts...)
	},
	List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.SecretList); ok {
			return errors.New("Secrets' data was listed")
		}
		return c.List(ctx, list, opts...)
	},
}

// While the original's leader lease is live, the group's members defer to it whatever Leases they
// hold (a cut-over, or a rollback that left them): the leader is the owner, and the shoot is probed.
func TestALiveLeaderOwnsTheShootWhateverTheGroupsLeases(t *testing.T) {
	now := time.Now()
	leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "dwd-prober-leader-election"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("original-0"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-5 * time.Second)))}}
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "dwd-prober-member-dwd-0",
		Labels: map[string]string{"dwd.gardener.cloud/group": "dwd-prober", "dwd.gardener.cloud/lease-kind": "member"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("dwd-0"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(now))}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--a", Name: "kubeconfig"}}
	e, err := Explain(context.Background(), fakeReader(t, noSecretData, healthyCluster(), leader, member, secret), options(now))
	require.NoError(t, err)
	assert.True(t, e.Probed, e.NotProbed)
	assert.Equal(t, "garden/dwd-prober-leader-election", e.Owners[0].Leader)
	assert.Equal(t, "original-0", e.Owners[0].Holder)
	assert.True(t, e.KubeconfigSecret.Exists)
}

// A negative limit of Events shows none, and a forbidden read leaves the verdict unknown.
func TestBadLimitsAndForbiddenReadsGiveNoFalseAnswer(t *testing.T) {
	opts := options(time.Now())
	opts.Events = -1
	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "clusters"}, key.Name, nil)
	}}
	e, err := Explain(context.Background(), fakeReader(t, forbidden), opts)
	require.NoError(t, err)
	assert.Empty(t, e.Events)
	assert.False(t, e.Probed)
	assert.True(t, e.Unknown)
	assert.Contains(t, e.NotProbed, "unknown: the Cluster could not be read: forbidden")
}
