package weeder_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/weeder"
)

func dryRunDeletes(t *testing.T) float64 {
	return metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": dryrun.KindPodDelete})
}

// In dry run a window opens as usual, and the pods it would delete are counted once each and left
// alone, with no Event.
func TestDryRunDeletesNoPodAndCountsEachOnce(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	setSlice(t, ns, "etcd-main-client", false)
	crashing := []*corev1.Pod{
		createPod(t, ns, "kube-apiserver-0", apiserverLabels, "CrashLoopBackOff"),
		createPod(t, ns, "kube-apiserver-1", apiserverLabels, "CrashLoopBackOff"),
	}
	before, events := dryRunDeletes(t), metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": dryrun.KindEvent})
	lines := &logtest.Lines{}
	r := startReplicaWith(t, nil, env.Namespace(t), "dwd-0", weeder.Options{Config: weederConfig(t, time.Minute), MaxWindows: 10,
		DryRun: dryrun.New(lines.Logger(1))})
	require.Eventually(t, func() bool { return r.Owns(ns) }, 20*time.Second, 10*time.Millisecond)

	setSlice(t, ns, "etcd-main-client", true)
	require.Eventually(t, func() bool { return dryRunDeletes(t) == before+2 }, 10*time.Second, 5*time.Millisecond,
		"each crash-looping pod is counted")
	require.Eventually(t, func() bool {
		return metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": dryrun.KindEvent}) == events+2
	}, 5*time.Second, 5*time.Millisecond, "the Event of each delete is counted, not recorded")
	// The pod changes (another restart): the window sees it again, and counts it no more.
	crashing[0].Status.ContainerStatuses[0].RestartCount++
	require.NoError(t, env.Client.Status().Update(context.Background(), crashing[0]))
	require.Eventually(t, func() bool { return len(lines.With(`"msg"="Dry run: counted before"`, string(crashing[0].UID))) > 0 },
		10*time.Second, 10*time.Millisecond, "the window saw the pod again")
	assert.Equal(t, before+2, dryRunDeletes(t), "each pod is counted once")
	for _, pod := range crashing {
		assert.True(t, exists(t, pod), "%s is not deleted", pod.Name)
	}
	list := &eventsv1.EventList{}
	require.NoError(t, env.Client.List(context.Background(), list, client.InNamespace(ns)))
	assert.Empty(t, list.Items, "no Event recorded")
}
