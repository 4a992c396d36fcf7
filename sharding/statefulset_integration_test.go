package sharding_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

func TestStatefulSetPodDepartingReadsThePodAndItsStatefulSet(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	sts := env.CreateStatefulSet(t, ns, "dwd", 3)
	env.CreatePod(t, ns, "dwd-2", sts)
	env.CreatePod(t, ns, "loose-0", nil)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	hook := func(c kubernetes.Interface, name string) func(context.Context) (bool, error) {
		return sharding.StatefulSetPod{Client: c, Pod: types.NamespacedName{Namespace: ns, Name: name}}.Departing
	}

	t.Run("restart", func(t *testing.T) {
		got, err := hook(admin, "dwd-2")(ctx)
		require.NoError(t, err)
		assert.False(t, got, "a pod within spec.replicas comes back")
	})
	t.Run("with only the permissions the comment names", func(t *testing.T) {
		got, err := hook(impersonating(t, ns, "dwd", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get"}},
		}), "dwd-2")(ctx)
		require.NoError(t, err)
		assert.False(t, got)
	})
	t.Run("no permission on statefulsets", func(t *testing.T) {
		_, err := hook(impersonating(t, ns, "pods-only", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		}), "dwd-2")(ctx)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorContains(t, err, "statefulset")
	})
	t.Run("no permission at all", func(t *testing.T) {
		_, err := hook(impersonating(t, ns, "nothing", nil), "dwd-2")(ctx)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
	})
	t.Run("no such pod", func(t *testing.T) {
		_, err := hook(admin, "dwd-9")(ctx)
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
	})
	t.Run("pod not owned by a statefulset", func(t *testing.T) {
		_, err := hook(admin, "loose-0")(ctx)
		assert.ErrorContains(t, err, "not controlled by a StatefulSet")
	})

	t.Run("scale-down", func(t *testing.T) {
		sts.Spec.Replicas = ptr.To[int32](2)
		require.NoError(t, env.Client.Update(ctx, sts))
		got, err := hook(admin, "dwd-2")(ctx)
		require.NoError(t, err)
		assert.True(t, got, "ordinal 2 is outside 2 replicas")
	})
	t.Run("statefulset being deleted", func(t *testing.T) {
		sts.Spec.Replicas = ptr.To[int32](3)
		sts.Finalizers = []string{"test.dwd.gardener.cloud/hold"}
		require.NoError(t, env.Client.Update(ctx, sts))
		got, err := hook(admin, "dwd-2")(ctx)
		require.NoError(t, err)
		require.False(t, got, "precondition: back to 3 replicas")
		require.NoError(t, env.Client.Delete(ctx, sts))
		got, err = hook(admin, "dwd-2")(ctx)
		require.NoError(t, err)
		assert.True(t, got)
	})
	t.Run("statefulset gone", func(t *testing.T) {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts))
		sts.Finalizers = nil
		require.NoError(t, env.Client.Update(ctx, sts))
		got, err := hook(admin, "dwd-2")(ctx)
		require.NoError(t, err)
		assert.True(t, got)
	})
}

// impersonating returns a client acting as user, bound in ns to a Role with rules.
func impersonating(t *testing.T, ns, user string, rules []rbacv1.PolicyRule) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(env.UserWithRole(t, ns, user, rules))
}

// A survivor asks whether a member away on a returning leave will be back: not when a scale-down left
// its ordinal outside the StatefulSet's range, nor when its new Pod cannot be scheduled or pulled; a Pod
// not created yet, or terminating, says nothing.
func TestStatefulSetPodWontReturnReadsTheStatefulSetAndTheMembersPod(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	sts := env.CreateStatefulSet(t, ns, "dwd", 3)
	env.CreatePod(t, ns, "dwd-0", sts)
	self := sharding.StatefulSetPod{Pod: types.NamespacedName{Namespace: ns, Name: "dwd-0"}, Client: impersonating(t, ns, "dwd", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get"}},
	})}
	wontReturn := func(member string) bool {
		t.Helper()
		got, err := self.WontReturn(ctx, member)
		require.NoError(t, err)
		return got
	}

	assert.False(t, wontReturn("dwd-2"), "no Pod yet: a rolling update creates it within seconds")
	pod := env.CreatePod(t, ns, "dwd-2", sts)
	assert.False(t, wontReturn("dwd-2"), "a new Pod, not tried by the scheduler")
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	require.NoError(t, env.Client.Status().Update(ctx, pod))
	assert.True(t, wontReturn("dwd-2"), "no node for the new Pod")
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "dwd", Image: "dwd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	require.NoError(t, env.Client.Status().Update(ctx, pod))
	assert.True(t, wontReturn("dwd-2"), "its image cannot be pulled")
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	require.NoError(t, env.Client.Status().Update(ctx, pod))
	assert.False(t, wontReturn("dwd-2"), "running")

	sts.Spec.Replicas = ptr.To[int32](2)
	require.NoError(t, env.Client.Update(ctx, sts))
	assert.True(t, wontReturn("dwd-2"), "a scale-down after its stop left ordinal 2 outside 2 replicas")
	assert.False(t, wontReturn("dwd-1"), "ordinal 1 is within 2 replicas")
	_, err := self.WontReturn(ctx, "dwd")
	assert.ErrorContains(t, err, "no ordinal")

	denied := sharding.StatefulSetPod{Pod: self.Pod, Client: impersonating(t, ns, "pods-only", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	})}
	_, err = denied.WontReturn(ctx, "dwd-2")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
}
