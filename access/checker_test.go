package access

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

var env *test.Environment

func TestMain(m *testing.M) { os.Exit(test.Main(m, &env)) }

// serviceAccountConfig returns env's admin config impersonating a new ServiceAccount of ns, allowed
// list and watch on Leases in ns.
func serviceAccountConfig(t *testing.T, ns string) *rest.Config {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "dwd", Namespace: ns}}
	require.NoError(t, env.Client.Create(ctx, sa))
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "dwd", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list", "watch"}},
	}}
	require.NoError(t, env.Client.Create(ctx, role))
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dwd", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dwd"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "dwd", Namespace: ns}}}
	require.NoError(t, env.Client.Create(ctx, binding))
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":dwd"}
	test.AwaitGranted(t, cfg, ns, role.Rules)
	return cfg
}

func TestCheckerNamesMissingPermissionsUntilGranted(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	client, err := kubernetes.NewForConfig(serviceAccountConfig(t, ns))
	require.NoError(t, err)
	logs := &logtest.Lines{}
	list := Permission{Verb: "list", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, For: "the leases"}
	del := Permission{Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, For: "orphans"}
	create := Permission{Verb: "create", Group: "events.k8s.io", Resource: "events", For: "Events", Optional: true, Without: "no Events"}
	patch := create
	patch.Verb = "patch"
	c := &Checker{Reviews: client.AuthorizationV1().SelfSubjectAccessReviews(), Permissions: []Permission{list, del, create, patch},
		Log: logs.Logger(0)}

	require.ErrorContains(t, c.ReadyCheck(nil), "unchecked", "not ready before the first answer")
	c.CheckOnce(ctx)
	err = c.ReadyCheck(nil)
	require.Error(t, err, "a required permission is missing")
	assert.Contains(t, err.Error(), "delete coordination.k8s.io/leases in "+ns)
	assert.NotContains(t, err.Error(), "list coordination", "granted")
	assert.NotContains(t, err.Error(), "events", "an optional permission does not block readiness")
	assert.Len(t, logs.With(`"Missing permission"`, `"verbs"=["delete"]`, `"resource"="leases"`, `"namespace"="`+ns+`"`, `"neededFor"="orphans"`), 1)
	assert.Len(t, logs.With(`"Missing optional permission"`, `"verbs"=["create" "patch"]`, `"resource"="events"`, `"without"="no Events"`), 1,
		"one line for both verbs of Events, saying what the replica does without them")
	assert.False(t, c.MayRecord()(), "Events are dropped while the replica may not create them")

	c.CheckOnce(ctx)
	assert.Len(t, logs.With(`"Missing permission"`), 1, "logged once, not at every check")

	role := &rbacv1.Role{}
	require.NoError(t, env.Client.Get(ctx, keyOf(ns, "dwd"), role))
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}})
	require.NoError(t, env.Client.Update(ctx, role))
	require.Eventually(t, func() bool { c.CheckOnce(ctx); return c.ReadyCheck(nil) == nil }, 10*time.Second, 100*time.Millisecond,
		"ready once the permission is granted")
	assert.Len(t, logs.With(`"Permission granted"`, `"verbs"=["delete"]`, `"resource"="leases"`), 1)
}

func TestRecorderDropsEventsWhileNotAllowed(t *testing.T) {
	fake := events.NewFakeRecorder(10)
	may := false
	r := Recorder(fake, func() bool { return may })
	pod := &corev1.Pod{}
	r.Eventf(pod, nil, corev1.EventTypeNormal, "Dropped", "Test", "not %s", "sent")
	r.AnnotatedEventf(pod, nil, nil, corev1.EventTypeNormal, "Dropped", "Test", "not %s", "sent")
	assert.Empty(t, fake.Events)
	may = true
	r.Eventf(pod, nil, corev1.EventTypeNormal, "Sent", "Test", "%s", "sent")
	r.AnnotatedEventf(pod, nil, nil, corev1.EventTypeNormal, "Sent", "Test", "%s", "sent")
	assert.Len(t, fake.Events, 2)
}

func TestRecorderCutsNotesToTheAPILimit(t *testing.T) {
	for _, tc := range []struct {
		name, note, want string
	}{
		{name: "short", note: "50% done", want: "50% done"},
		{name: "at the limit", note: strings.Repeat("a", NoteLimit), want: strings.Repeat("a", NoteLimit)},
		{name: "over the limit", note: strings.Repeat("a", NoteLimit+1), want: strings.Repeat("a", NoteLimit-3) + "…"},
		{name: "on a rune boundary", note: "a" + strings.Repeat("é", NoteLimit), want: "a" + strings.Repeat("é", (NoteLimit-4)/2) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := events.NewFakeRecorder(1)
			Recorder(fake, func() bool { return true }).Eventf(&corev1.Pod{}, nil, corev1.EventTypeNormal, "R", "A", "%s", tc.note)
			got := strings.TrimPrefix(<-fake.Events, "Normal R ")
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), NoteLimit)
		})
	}
}

func TestMayRecordAsksForEventsOfTheEventsAPI(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	client, err := kubernetes.NewForConfig(serviceAccountConfig(t, ns))
	require.NoError(t, err)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "core-events-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "core-events-" + ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "dwd", Namespace: ns}}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "core-events-" + ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}}
	require.NoError(t, env.Client.Create(ctx, role))
	require.NoError(t, env.Client.Create(ctx, binding))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, binding); _ = env.Client.Delete(ctx, role) })
	c := &Checker{Reviews: client.AuthorizationV1().SelfSubjectAccessReviews(),
		Permissions: Required(Needs{Weeder: true}), Log: logr.Discard()}
	require.True(t, c.MayRecord()(), "Events are written before the first answer")

	c.CheckOnce(ctx)
	assert.False(t, c.MayRecord()(), "core/v1 Events granted, events.k8s.io ones not: dropped")

	role.Rules[0].APIGroups = []string{"events.k8s.io"}
	require.NoError(t, env.Client.Update(ctx, role))
	require.Eventually(t, func() bool { c.CheckOnce(ctx); return c.MayRecord()() }, 10*time.Second, 100*time.Millisecond,
		"written once events.k8s.io Events are granted")
}

func TestRequiredSaysWhatEachModeNeeds(t *testing.T) {
	names := func(n Needs) []string {
		var out []string
		for _, p := range Required(n) {
			out = append(out, p.String())
		}
		return out
	}
	leader := names(Needs{Prober: true, LeaderNamespace: "garden", LeaderLease: "dwd-prober-leader-election"})
	assert.Contains(t, leader, "patch apps/deployments in all namespaces")
	assert.Contains(t, leader, "update coordination.k8s.io/leases dwd-prober-leader-election in garden")
	for _, p := range leader {
		assert.NotContains(t, p, "list coordination.k8s.io/leases", "the original's mode lists no Leases")
		assert.NotContains(t, p, "pods", "a prober does not touch pods")
	}
	sharded := names(Needs{Weeder: true, ShardNamespace: "dwd", PodNamespace: "dwd"})
	assert.Contains(t, sharded, "list coordination.k8s.io/leases in dwd")
	assert.Contains(t, sharded, "delete pods in all namespaces")
	assert.Contains(t, sharded, "get apps/statefulsets in dwd")
	assert.NotContains(t, sharded, "patch apps/deployments in all namespaces", "a weeder scales nothing")

	watching := names(Needs{Prober: true, ShardNamespace: "dwd-shards", WatchedLeaderNamespace: "garden", WatchedLeaders: []string{"dwd-prober-leader-election"}})
	for _, verb := range []string{"get", "list", "watch"} {
		assert.Contains(t, watching, verb+" coordination.k8s.io/leases dwd-prober-leader-election in garden", "the original's leader lease is read")
	}
	for _, p := range watching {
		assert.False(t, strings.HasSuffix(p, "coordination.k8s.io/leases in garden"), "no other Lease of garden: %s", p)
	}
	inShards := names(Needs{Prober: true, ShardNamespace: "dwd", WatchedLeaderNamespace: "dwd", WatchedLeaders: []string{"dwd-prober-leader-election"}})
	for _, p := range inShards {
		assert.NotContains(t, p, "leader-election", "the group's own permissions in its namespace cover the leader lease")
	}

	kinds := names(Needs{Prober: true, ScaledKinds: []string{"Deployment", "StatefulSet"}})
	assert.Contains(t, kinds, "list apps/statefulsets in all namespaces", "every kind the prober scales")
	assert.Contains(t, kinds, "patch apps/statefulsets in all namespaces")
	assert.Contains(t, kinds, "patch apps/deployments in all namespaces")

	both := names(Needs{Prober: true, ShardNamespace: "garden", LeaderNamespace: "garden", LeaderLease: "dwd-prober-leader-election"})
	creates := 0
	for _, p := range both {
		if p == "create coordination.k8s.io/leases in garden" {
			creates++
		}
	}
	assert.Equal(t, 1, creates, "sharding behind leader election lists creating Leases once")
}

func keyOf(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}

// A shadow (--dry-run) writes nothing to a shoot's control plane: it needs reads and its own Leases,
// no scale patch, no pod delete, no Event, so that it can run on read-only permissions beside the original.
func TestADryRunNeedsNoWriteToAShoot(t *testing.T) {
	for _, p := range Required(Needs{Prober: true, Weeder: true, ShardNamespace: "dwd-shards", DryRun: true}) {
		if p.Namespace == "dwd-shards" {
			continue
		}
		assert.Contains(t, []string{"get", "list", "watch"}, p.Verb, "%s", p)
	}
	reads := Required(Needs{Prober: true, Weeder: true, DryRun: true})
	assert.Contains(t, reads, Permission{Verb: "list", Resource: "pods", For: "the weeder's windows (weeder/window.go)"})
}
