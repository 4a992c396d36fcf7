package main

import (
	"context"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// A replica in a Pod records the sharding's Events on it through events.k8s.io/v1: here the Warning
// of a live member advertising other settings, which a member sees as soon as it starts.
func TestReplicaRecordsShardingEventsOnItsPod(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	pod := env.CreatePod(t, ns, "dwd-0", nil)
	t.Setenv("POD_NAME", pod.Name)
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv("POD_UID", string(pod.UID))
	group := "g-" + ns[len(ns)-5:]

	// Another member of the group, live, that disagrees.
	clientset, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	other := &leases.Member{Store: leases.APIStore{Leases: clientset.CoordinationV1().Leases(ns)}, Group: group, Name: "dwd-9",
		Incarnation: "other", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Clock: clock.RealClock{}, Settings: "partitions=7"}
	other.Step(context.Background(), leases.Hooks{OnFence: func() {}, OnRenewFailure: func(err error) { t.Log(err) }})
	require.False(t, other.Fenced(time.Now()), "the other member holds its lease")

	r := startReplica(t, "run", "--weeder-config=testdata/weeder.yaml", "--member-name="+pod.Name,
		"--shard-namespace="+ns, "--shard-group="+group)
	e := eventOn(t, ns, pod.Name, "SettingsMismatch")
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, sharding.ActionRebalance, e.Action)
	assert.Equal(t, "dependency-watchdog-sharding", e.ReportingController)
	assert.Equal(t, pod.UID, e.Regarding.UID)
	assert.Contains(t, e.Note, `dwd-9 advertises "partitions=7"`)
	assert.Equal(t, 0, r.stop(t))
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
