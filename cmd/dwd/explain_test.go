package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/explain"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// explainShoot creates a shoot namespace with its Cluster (hibernated or not), its kubeconfig Secret and
// kube-controller-manager and machine-controller-manager at replicas, marked as scaled down when
// replicas is 0.
func explainShoot(t *testing.T, hibernated bool, replicas int32) string {
	ctx := context.Background()
	ns := env.Namespace(t)
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"})
	cluster.SetName(ns)
	cluster.Object["spec"] = map[string]any{"seed": map[string]any{}, "cloudProfile": map[string]any{}, "shoot": map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot", "metadata": map[string]any{"name": "s", "namespace": "garden-p"},
		"spec": map[string]any{"hibernation": map[string]any{"enabled": hibernated},
			"provider": map[string]any{"workers": []any{map[string]any{"name": "pool-a"}}}},
		"status": map[string]any{"lastOperation": map[string]any{"type": "Reconcile", "state": "Succeeded"}},
	}}
	require.NoError(t, env.Client.Create(ctx, cluster))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shoot-access-dependency-watchdog-probe"},
		Data: map[string][]byte{"kubeconfig": []byte("not-a-kubeconfig-secret")}}))
	for _, name := range []string{"kube-controller-manager", "machine-controller-manager"} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}}}}
		if replicas == 0 {
			d.Annotations = map[string]string{scaler.ReplicasAnnotation: "2", scaler.MeltdownProtectionAnnotation: ""}
		}
		require.NoError(t, env.Client.Create(ctx, d))
	}
	return ns
}

// explainJSON runs dwd explain -o json on ns and decodes its report.
func explainJSON(t *testing.T, ns, leases string) explain.Explanation {
	code, stdout, stderr := run(context.Background(), "explain", ns, "-o", "json", "--prober-config=testdata/prober.yaml",
		"--kubeconfig="+env.KubeconfigFile(t), "--shard-namespace="+leases, "--leader-election-namespace="+leases)
	require.Equal(t, 0, code, stderr)
	var e explain.Explanation
	require.NoError(t, json.Unmarshal([]byte(stdout), &e), stdout)
	return e
}

// dwd explain against the real API server, in the states an operator asks about: a shoot probed by a
// live member, a hibernated one, one whose member has gone (unowned), and one scaled down.
func TestExplainTellsWhetherAndWhyAShootIsProbed(t *testing.T) {
	env.Require(t)
	leases := env.Namespace(t)
	probed, hibernated, down := explainShoot(t, false, 2), explainShoot(t, true, 2), explainShoot(t, false, 0)
	require.NoError(t, env.Client.Create(context.Background(), &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: down, Name: "kcm-scaled-down"}, EventTime: metav1.NowMicro(),
		ReportingController: "dwd", ReportingInstance: "dwd-0", Action: scaler.EventAction, Reason: scaler.EventScaledDown, Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: down, Name: "kube-controller-manager"}, Note: "Scaled down from 2 to 0 replicas"}))
	r := startReplica(t, "run", "--prober-config=testdata/prober.yaml", "--member-name=dwd-0", "--shard-namespace="+leases, "--leader-election-namespace="+leases)
	require.Eventually(t, func() bool { return heldPartitions(t, leases, "dwd-prober", "dwd-0") == config.DefaultPartitionCount },
		30*time.Second, 100*time.Millisecond)

	e := explainJSON(t, probed, leases)
	assert.True(t, e.Probed, e.NotProbed)
	require.Len(t, e.Owners, 2)
	assert.Equal(t, "dwd-0", e.Owners[0].Holder)
	assert.Equal(t, "live", e.Owners[0].HolderState)
	assert.True(t, e.Owners[0].Owned)
	assert.Contains(t, e.Owners[1].Error, "no Leases of group dwd-weeder", "no weeder runs")
	assert.False(t, e.ScaledDown)
	require.Len(t, e.Dependents, 3)
	assert.Equal(t, int64(2), *e.Dependents[0].Replicas)
	assert.False(t, e.Dependents[2].Exists, "cluster-autoscaler is optional and missing")

	e = explainJSON(t, hibernated, leases)
	assert.False(t, e.Probed)
	assert.Equal(t, prober.NotProbedHibernated, e.Lifecycle)
	assert.Equal(t, "hibernation is enabled", e.NotProbed)

	e = explainJSON(t, down, leases)
	assert.True(t, e.ScaledDown)
	assert.Equal(t, map[string]string{scaler.ReplicasAnnotation: "2", scaler.MeltdownProtectionAnnotation: ""}, e.Dependents[0].Annotations)
	require.Len(t, e.Events, 1)
	assert.Equal(t, scaler.EventScaledDown, e.Events[0].Reason)

	require.Equal(t, 0, r.stop(t))
	e = explainJSON(t, probed, leases)
	assert.False(t, e.Probed)
	assert.False(t, e.Owners[0].Owned)
	assert.Regexp(t, `^no live member of group dwd-prober holds partition \d+$`, e.NotProbed)

	code, stdout, _ := run(context.Background(), "explain", down, "--prober-config=testdata/prober.yaml",
		"--kubeconfig="+env.KubeconfigFile(t), "--shard-namespace="+leases, "--leader-election-namespace="+leases)
	require.Equal(t, 0, code)
	t.Log("\n" + stdout)
	for _, want := range []string{"Scaled down  yes", "Deployment/kube-controller-manager", "meltdown-protection-active=, replicas=2", "ScaledDown", "Scaled down from 2 to 0 replicas"} {
		assert.Contains(t, stdout, want)
	}

	code, _, stderr := run(context.Background(), "explain", down, "--events=-1", "--kubeconfig="+env.KubeconfigFile(t))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--events -1: must be 0 or more")
}

// Installed as kubectl-dwd, the binary is kubectl's plugin: `kubectl dwd explain` runs its explain,
// and its help names it so.
func TestTheBinaryAnswersAsKubectlDwd(t *testing.T) {
	root := rootCommandAs("/usr/local/bin/kubectl-dwd")
	cmd, _, err := root.Find([]string{"explain"})
	require.NoError(t, err)
	assert.Equal(t, "kubectl dwd explain", cmd.CommandPath())
	cmd, _, err = rootCommandAs("/usr/local/bin/dwd").Find([]string{"explain"})
	require.NoError(t, err)
	assert.Equal(t, "dwd explain", cmd.CommandPath())
}

// Without --prober-config, explain looks for what Gardener's prober config names.
func TestExplainDefaultsToGardenersProberConfig(t *testing.T) {
	cfg, err := explainProberConfig("")
	require.NoError(t, err)
	assert.Equal(t, "shoot-access-dependency-watchdog-probe", cfg.KubeConfigSecretName)
	var names []string
	for _, info := range cfg.DependentResourceInfos {
		names = append(names, info.Ref.Name)
	}
	assert.Equal(t, []string{"kube-controller-manager", "machine-controller-manager", "cluster-autoscaler"}, names)
	_, err = explainProberConfig("testdata/no-such-file.yaml")
	assert.ErrorContains(t, err, "--prober-config testdata/no-such-file.yaml")
}
