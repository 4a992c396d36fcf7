package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

func TestPodOrdinal(t *testing.T) {
	tests := []struct {
		name    string
		want    int64
		wantErr bool
	}{
		{"dwd-0", 0, false},
		{"dwd-prober-12", 12, false},
		{"a-b-c-2147483647", 1<<31 - 1, false},
		{"dwd", 0, true},
		{"dwd-", 0, true},
		{"dwd-x", 0, true},
		{"dwd-+1", 0, true},
		{"dwd-1a", 0, true},
		{"dwd-2147483648", 0, true},
		{"dwd-0-canary", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := podOrdinal(tt.name)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDeparts(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "dwd", UID: "sts-uid", Controller: ptr.To(true)}
	sts := func(mutate func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "dwd", UID: "sts-uid"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
		mutate(s)
		return s
	}
	keep := func(*appsv1.StatefulSet) {}
	tests := []struct {
		name    string
		pod     string
		sts     *appsv1.StatefulSet
		want    bool
		wantErr bool
	}{
		{"first pod, rolling update", "dwd-0", sts(keep), false, false},
		{"last pod within replicas", "dwd-2", sts(keep), false, false},
		{"scaled down below the pod", "dwd-2", sts(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](2) }), true, false},
		{"scaled to zero", "dwd-0", sts(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](0) }), true, false},
		{"replicas unset means one", "dwd-0", sts(func(s *appsv1.StatefulSet) { s.Spec.Replicas = nil }), false, false},
		{"replicas unset, second pod", "dwd-1", sts(func(s *appsv1.StatefulSet) { s.Spec.Replicas = nil }), true, false},
		{"start ordinal, in range", "dwd-7", sts(func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }), false, false},
		{"start ordinal, past the range", "dwd-8", sts(func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }), true, false},
		{"start ordinal, below the range", "dwd-4", sts(func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }), true, false},
		{"statefulset gone", "dwd-0", nil, true, false},
		{"statefulset being deleted", "dwd-0", sts(func(s *appsv1.StatefulSet) { s.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), true, false},
		{"statefulset replaced under the same name", "dwd-0", sts(func(s *appsv1.StatefulSet) { s.UID = "other-uid" }), true, false},
		{"no ordinal", "dwd", sts(keep), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := departs(tt.pod, owner, tt.sts)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestStatefulSetOwner(t *testing.T) {
	ref := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "dwd", UID: "uid", Controller: ptr.To(controller)}
	}
	tests := []struct {
		name    string
		owners  []metav1.OwnerReference
		wantErr bool
	}{
		{"statefulset", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", true)}, false},
		{"statefulset after another owner", []metav1.OwnerReference{ref("v1", "ConfigMap", false), ref("apps/v1", "StatefulSet", true)}, false},
		{"no owner", nil, true},
		{"replicaset", []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", true)}, true},
		{"statefulset, not the controller", []metav1.OwnerReference{ref("apps/v1", "StatefulSet", false)}, true},
		{"a StatefulSet of another group", []metav1.OwnerReference{ref("apps.kruise.io/v1beta1", "StatefulSet", true)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dwd-0", OwnerReferences: tt.owners}}
			got, err := statefulSetOwner(pod)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, ref("apps/v1", "StatefulSet", true), got)
		})
	}
}

func TestDepartingReadsThePodAndItsStatefulSet(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	sts := createStatefulSet(t, ns, "dwd", 3)
	createPod(t, ns, "dwd-2", sts)
	createPod(t, ns, "loose-0", nil)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	hook := func(c kubernetes.Interface, name string) func(context.Context) (bool, error) {
		return departing(c, types.NamespacedName{Namespace: ns, Name: name})
	}

	t.Run("restart", func(t *testing.T) {
		got, err := hook(admin, "dwd-2")(ctx)
		require.NoError(t, err)
		assert.False(t, got, "a pod within spec.replicas comes back")
	})
	t.Run("with only the permissions the comment names", func(t *testing.T) {
		got, err := hook(userWithRole(t, ns, "dwd", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get"}},
		}), "dwd-2")(ctx)
		require.NoError(t, err)
		assert.False(t, got)
	})
	t.Run("no permission on statefulsets", func(t *testing.T) {
		_, err := hook(userWithRole(t, ns, "pods-only", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		}), "dwd-2")(ctx)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorContains(t, err, "statefulset")
	})
	t.Run("no permission at all", func(t *testing.T) {
		_, err := hook(userWithRole(t, ns, "nothing", nil), "dwd-2")(ctx)
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

func TestPodEventIsRecordedOnThePod(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	pod := createPod(t, ns, "dwd-0", nil)
	mgr := startManager(t)
	o := newOptions(groupFor(roleProber))
	o.baseRestConfig = env.Config
	o.sharding.Namespace, o.sharding.MemberName = ns, "dwd-0"

	runner, err := o.newShardingRunner(mgr, o.shardingFor(roleProber), roleProber)
	require.NoError(t, err)
	assert.Nil(t, runner.Event, "no Events outside a Pod")
	assert.NotNil(t, runner.Departing)

	o.pod = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}
	runner, err = o.newShardingRunner(mgr, o.shardingFor(roleProber), roleProber)
	require.NoError(t, err)
	require.NotNil(t, runner.Event)
	runner.Event(corev1.EventTypeNormal, "Returning", "Leave", "stopping to restart; the others keep the shoots reserved")
	e := eventOn(t, ns, pod.Name, "Returning")
	assert.Equal(t, corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}, e.Regarding)
	assert.Equal(t, corev1.EventTypeNormal, e.Type)
	assert.Equal(t, "Leave", e.Action)
	assert.Equal(t, "stopping to restart; the others keep the shoots reserved", e.Note)
	assert.Equal(t, "dependency-watchdog-sharding", e.ReportingController)
}

// eventOn waits for an events.k8s.io Event with reason about the Pod ns/pod and returns it.
func eventOn(t *testing.T, ns, pod, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	require.Eventually(t, func() bool {
		list := &eventsv1.EventList{}
		require.NoError(t, env.Client.List(context.Background(), list, client.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == "Pod" && e.Regarding.Name == pod {
				found = e
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "an events.k8s.io Event %s on pod %s/%s", reason, ns, pod)
	return found
}

// createStatefulSet creates a StatefulSet object; nothing runs it, since no controller runs.
func createStatefulSet(t *testing.T, ns, name string, replicas int32) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "dwd", Image: "dwd"}}},
			},
		},
	}
	require.NoError(t, env.Client.Create(context.Background(), sts))
	return sts
}

// createPod creates a Pod object, controlled by owner when it is not nil.
func createPod(t *testing.T, ns, name string, owner *appsv1.StatefulSet) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "dwd", Image: "dwd"}}},
	}
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
	}
	require.NoError(t, env.Client.Create(context.Background(), pod))
	return pod
}

// userWithRole returns a client that acts as a user bound in ns to a Role with rules.
func userWithRole(t *testing.T, ns, user string, rules []rbacv1.PolicyRule) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	require.NoError(t, env.Client.Create(ctx, role))
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	require.NoError(t, env.Client.Create(ctx, binding))
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	test.AwaitGranted(t, cfg, ns, rules)
	return kubernetes.NewForConfigOrDie(cfg)
}

// startManager runs a manager with nothing added, for its event recorder, until the test ends.
func startManager(t *testing.T) manager.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("the manager did not stop")
		}
	})
	return mgr
}
