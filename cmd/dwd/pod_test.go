package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func TestPodEventIsRecordedOnThePod(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	pod := env.CreatePod(t, ns, "dwd-0", nil)
	mgr := startManager(t)
	o := newOptions(groupFor(roleProber))
	o.baseRestConfig = env.Config
	o.sharding.Namespace, o.sharding.MemberName = ns, "dwd-0"

	opts, err := o.shardingRunnerOptions(mgr, o.shardingFor(roleProber), roleProber)
	require.NoError(t, err)
	assert.Nil(t, opts.Event, "no Events outside a Pod")
	assert.NotNil(t, opts.Departing)

	o.pod = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}
	opts, err = o.shardingRunnerOptions(mgr, o.shardingFor(roleProber), roleProber)
	require.NoError(t, err)
	require.NotNil(t, opts.Event)
	opts.Event(corev1.EventTypeNormal, "Returning", "Leave", "stopping to restart; the others keep the shoots reserved")
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
