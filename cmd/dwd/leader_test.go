package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/replica"
)

// TestGardenerProberCommandLineLeadsAlone runs the original's command line as Gardener passes it: the
// leader owns every shoot, and the only Lease it touches is the leader lease.
func TestGardenerProberCommandLineLeadsAlone(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	r := startReplica(t, append(append([]string{}, gardenerProberArgs...),
		"--config-file=testdata/prober.yaml", "--leader-election-namespace="+ns)...)

	// The member label is the host part of the leader lease's identity (the host name and a UUID):
	// the pod's name, as for a member of a sharded group.
	require.Eventually(t, func() bool {
		host, _, _ := strings.Cut(leaderIdentity(t, ns), "_")
		n, ok := metricValue(r.metricsAddr, `dwd_sharding_partitions_held{group="dwd-prober",member="`+host+`"} `)
		return host != "" && ok && n == 1
	}, 30*time.Second, 100*time.Millisecond, "the leader holds the one partition of everything")
	require.Eventually(t, func() bool { return httpOK("http://" + r.healthAddr + "/readyz") }, 30*time.Second, 100*time.Millisecond,
		"ready: every permission there, the caches synced")
	list := &coordinationv1.LeaseList{}
	require.NoError(t, env.Client.List(context.Background(), list, client.InNamespace(ns)))
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	assert.Equal(t, []string{"dwd-prober-leader-election"}, names, "no member or partition Leases")
	assert.Equal(t, 0, r.stop(t))
	assert.NotContains(t, r.stderr, "the leader stops writing sooner", "the original's timings keep the fence margin")
}

// TestALeaderRenewDeadlineWithoutMarginIsClampedWithAWarning: the original's flags still start when
// the renew deadline leaves less margin before the lease duration than dwd keeps; the leader then
// writes for less than the renew deadline after a renewal and says so at start.
func TestALeaderRenewDeadlineWithoutMarginIsClampedWithAWarning(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	r := startReplica(t, "prober", "--config-file=testdata/prober.yaml", "--enable-leader-election",
		"--leader-election-namespace="+ns, "--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=14500ms")
	assert.Equal(t, 0, r.stop(t))
	assert.Contains(t, r.stderr, "Warning: the leader stops writing sooner after a renewal than --leader-elect-renew-deadline says")
	assert.Contains(t, r.stderr, `"writesUntil":12}`, "15 s less the margin of 3 s (20 %), in seconds")
}

// leaderIdentity returns the holder of the prober's leader lease in ns, or "".
func leaderIdentity(t *testing.T, ns string) string {
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "dwd-prober-leader-election"}, lease); err != nil ||
		lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

func TestShardingFlagGiven(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{args: []string{"--enable-leader-election=true"}, want: false},
		{args: []string{"--enable-leader-election=true", "--shard-namespace=garden"}, want: true},
		{args: []string{"--shard-group=g"}, want: true},
		{args: []string{"--kube-api-qps=20"}, want: false},
	} {
		cmd := newRoleCommand(replica.RoleProber)
		require.NoError(t, cmd.ParseFlags(tc.args))
		assert.Equal(t, tc.want, shardingFlagGiven(cmd.Flags()), "%v", tc.args)
	}
}

// TestMetricsSecureServesOnlyAuthorizedCallers proves --metrics-secure: no token, 401; a token the seed
// does not allow get on /metrics, 403; an allowed one, the metrics.
func TestMetricsSecureServesOnlyAuthorizedCallers(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	r := startReplica(t, append(append([]string{}, gardenerProberArgs...),
		"--config-file=testdata/prober.yaml", "--leader-election-namespace="+ns, "--metrics-secure")...)
	allowed, denied := scraperToken(t, ns, "scraper", true), scraperToken(t, ns, "stranger", false)

	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	status := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, "https://"+r.metricsAddr+"/metrics", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool { return status(allowed) == http.StatusOK }, 30*time.Second, 100*time.Millisecond,
		"an authorized scrape gets the metrics")
	assert.Equal(t, http.StatusUnauthorized, status(""))
	assert.Equal(t, http.StatusForbidden, status(denied))
	assert.False(t, httpOK("http://"+r.metricsAddr+"/metrics"), "no plain HTTP")
	assert.Equal(t, 0, r.stop(t))
}

// scraperToken returns a token of a new ServiceAccount of ns, allowed get on /metrics or not.
func scraperToken(t *testing.T, ns, name string, allowed bool) string {
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
	if allowed {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
		require.NoError(t, env.Client.Create(ctx, role))
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
		require.NoError(t, env.Client.Create(ctx, binding))
		t.Cleanup(func() { _ = env.Client.Delete(ctx, binding); _ = env.Client.Delete(ctx, role) })
	}
	clientset, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	token, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return token.Status.Token
}

// TestProberMissingItsScaleTargetsIsNotReady: a prober that may not read a kind it scales (a
// StatefulSet, beside Gardener's Deployments) names the permission and stays unready, instead of
// idling while it waits for a cache that never syncs.
func TestProberMissingItsScaleTargetsIsNotReady(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	user := ns + "-prober"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"extensions.gardener.cloud"}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{"machine.sapcloud.io"}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}}
	require.NoError(t, env.Client.Create(ctx, role))
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	require.NoError(t, env.Client.Create(ctx, binding))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, binding); _ = env.Client.Delete(ctx, role) })

	auditFile := filepath.Join(t.TempDir(), "audit")
	r := startReplica(t, "prober", "--config-file=testdata/prober-statefulset.yaml", "--enable-leader-election",
		"--leader-election-namespace="+ns, "--kubeconfig="+impersonatingKubeconfig(t, user), "--audit-log="+auditFile)
	require.Eventually(t, func() bool {
		n, ok := metricValue(r.metricsAddr, "dwd_access_missing_permissions ")
		return ok && n == 4
	}, 30*time.Second, 100*time.Millisecond, "list, watch, get and patch on statefulsets are missing")
	require.Eventually(t, func() bool { return leaderIdentity(t, ns) != "" }, 30*time.Second, 100*time.Millisecond,
		"it leads: the manager's caches synced")
	assert.False(t, httpOK("http://"+r.healthAddr+"/readyz"), "not ready without its scale targets")
	resp, err := http.Get("http://" + r.healthAddr + "/readyz?verbose")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, string(body), "[-]permissions")
	assert.Contains(t, string(body), "[-]prober-dependents", "the leader's dependent caches cannot sync")
	assert.Contains(t, string(body), "[+]caches", "the manager's caches synced")
	assert.Equal(t, 0, r.stop(t))
	assert.Contains(t, r.stderr, `"msg":"Missing permission","verbs":["list","watch"],"group":"apps","resource":"statefulsets"`)
	// The original's mode writes its audit under the leader lease's name, not the sharded group's, so
	// that writes of both to one namespace count as two groups'.
	records, err := audit.ReadFile(auditFile)
	require.NoError(t, err)
	require.NotEmpty(t, records)
	assert.Equal(t, "dwd-prober-leader-election", records[0].Group)
}

// impersonatingKubeconfig writes the test API server's kubeconfig, acting as user.
func impersonatingKubeconfig(t *testing.T, user string) string {
	cfg, err := clientcmd.Load(env.KubeConfig)
	require.NoError(t, err)
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

func TestLeaderElectionTimingsCountWholeSeconds(t *testing.T) {
	for _, tc := range []struct {
		lease, renew string
		ok           bool
	}{
		{lease: "15s", renew: "10s", ok: true},
		{lease: "10.9s", renew: "10.5s", ok: false}, // the lease says 10 s: the others would not wait for the fence
		{lease: "11.5s", renew: "10.5s", ok: true},
	} {
		code, _, stderr := run(context.Background(), "prober", "--config-file=testdata/prober.yaml", "--enable-leader-election",
			"--leader-elect-lease-duration="+tc.lease, "--leader-elect-renew-deadline="+tc.renew, "--kubeconfig=/nonexistent")
		assert.Equal(t, !tc.ok, strings.Contains(stderr, "--leader-elect-renew-deadline"), "%s/%s: %s", tc.lease, tc.renew, stderr)
		assert.Equal(t, 1, code, "the kubeconfig is missing either way")
	}
}

func TestLeaderElectionLeavingNoFenceMarginIsRefused(t *testing.T) {
	code, _, stderr := run(context.Background(), "prober", "--config-file=testdata/prober.yaml", "--enable-leader-election",
		"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=500ms", "--kubeconfig=/nonexistent")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--leader-elect-lease-duration", "the flag that leaves no margin is named")
	assert.Contains(t, stderr, "leaves no time to write")
	assert.NotContains(t, stderr, "--leader-elect-renew-deadline", "the timings are in order otherwise")
}
