package prober

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Kinds of the seed the prober reads.
var (
	ClusterGVK = schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"}
	MachineGVK = schema.GroupVersionKind{Group: "machine.sapcloud.io", Version: "v1alpha1", Kind: "Machine"}
)

// takeoverJitter bounds the delay of the first probe of a cluster this replica takes over, or that
// is older than the initial delay: enough to spread a handover, short enough not to miss a cycle.
const takeoverJitter = 250 * time.Millisecond

// Manager runs the probes of the shoots this replica owns. It is the Cluster reconciler (start, stop
// and restart by the lifecycle rules) and the prober's sharding.PartitionHandler (start the probes
// of an acquired partition, stop those of a released one before the release goes on).
//
// Locking: mu guards probes and orders every start and stop of a probe; it is held while a stopped
// probe's run in flight is cancelled and waited for, so a probe never outlives its ownership.
type Manager struct {
	Config    *config.ProberConfig
	Ownership sharding.Ownership
	// Reader reads the seed from the caches: Clusters, kubeconfig Secrets, Machines.
	Reader    client.Reader
	Scaler    *scaler.Scaler
	Clients   *ShootClients
	Scheduler *Scheduler
	Recorder  record.EventRecorder
	Clock     clock.WithTicker
	Log       logr.Logger

	mu     sync.Mutex
	probes map[string]*shootProbe

	reportMu sync.Mutex
	reported map[string]string // broken Secret or Cluster → the version already reported
}

var _ sharding.PartitionHandler = (*Manager)(nil)

func (m *Manager) interval() time.Duration { return m.Config.ProbeInterval.Duration }
func (m *Manager) jitterFactor() float64   { return *m.Config.BackoffJitterFactor }

// Reconcile brings the probe of one Cluster (named after its shoot namespace) in line with the
// lifecycle rules and this replica's ownership.
func (m *Manager) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, m.sync(ctx, req.Name)
}

// Acquired starts the probes of the clusters in partition p; it does not wait for them. However the
// partition came here, its clusters start after a short jitter (new clusters after initialDelay).
func (m *Manager) Acquired(ctx context.Context, p int, _ sharding.Takeover) {
	for _, ns := range m.clustersIn(ctx, p) {
		if err := m.sync(ctx, ns); err != nil {
			m.Log.Error(err, "Starting probe of an acquired partition", "namespace", ns, "partition", p)
		}
	}
}

// Released stops the probes of partition p and returns when none of them runs any more.
func (m *Manager) Released(p int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ns := range m.probes {
		if m.Ownership.Partition(ns) == p {
			m.stopLocked(ns)
		}
	}
}

// clustersIn lists the cached Clusters of partition p.
func (m *Manager) clustersIn(ctx context.Context, p int) []string {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ClusterGVK.GroupVersion().WithKind("ClusterList"))
	if err := m.Reader.List(ctx, list, client.MatchingFields{PartitionIndex: partitionKey(p)}); err != nil {
		m.Log.Error(err, "Listing the clusters of a partition", "partition", p)
		return nil
	}
	names := make([]string, 0, len(list.Items))
	for _, c := range list.Items {
		names = append(names, c.GetName())
	}
	return names
}

// sync starts, restarts or stops the probe of ns.
func (m *Manager) sync(ctx context.Context, ns string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.Ownership.Owns(ns) {
		m.stopLocked(ns)
		return nil
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(ClusterGVK)
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: ns}, cluster); err != nil {
		m.stopLocked(ns)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading cluster %s: %w", ns, err)
	}
	shoot, err := shootOf(cluster)
	if err != nil {
		m.stopLocked(ns)
		m.reportBrokenCluster(cluster, err)
		return nil
	}
	run, spec, reason := Decide(shoot, m.Config.KCMNodeMonitorGraceDuration.Duration)
	if !run {
		m.Log.V(1).Info("Not probing", "namespace", ns, "reason", reason)
		m.stopLocked(ns)
		return nil
	}
	m.startLocked(ns, spec, m.firstRun(cluster))
	return nil
}

// firstRun is when a new probe first runs: initialDelay after the cluster's creation for a cluster
// younger than that, else (also when taken over from another replica) after a short jitter.
func (m *Manager) firstRun(cluster *unstructured.Unstructured) time.Time {
	now := m.Clock.Now()
	if due := cluster.GetCreationTimestamp().Add(m.Config.InitialDelay.Duration); due.After(now) {
		return due
	}
	return now.Add(time.Duration(rand.Int64N(int64(takeoverJitter))))
}

// startLocked schedules the probe of ns, or gives a running one its new spec (a restart).
func (m *Manager) startLocked(ns string, spec ProbeSpec, at time.Time) {
	if p, ok := m.probes[ns]; ok {
		if p.spec.Equal(spec) {
			return
		}
		m.Log.Info("Restarting probe: node conditions or grace period changed", "namespace", ns)
	} else {
		m.Log.Info("Starting probe", "namespace", ns, "firstRun", at)
	}
	p := &shootProbe{m: m, namespace: ns, spec: spec}
	if m.probes == nil {
		m.probes = map[string]*shootProbe{}
	}
	m.probes[ns] = p
	m.Scheduler.Schedule(ns, at, p.run)
	probesActive.Set(float64(len(m.probes)))
}

// stopLocked stops the probe of ns, waits for its run in flight, and drops what it kept.
func (m *Manager) stopLocked(ns string) {
	if _, ok := m.probes[ns]; !ok {
		return
	}
	delete(m.probes, ns)
	m.Scheduler.Remove(ns)
	m.Clients.Forget(ns)
	expiredFraction.DeleteLabelValues(ns)
	probesActive.Set(float64(len(m.probes)))
	m.Log.Info("Stopped probe", "namespace", ns)
}

// Probing reports whether a probe of ns is running here.
func (m *Manager) Probing(ns string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.probes[ns]
	return ok
}

// reportBrokenSecret logs, records an Event and counts a kubeconfig Secret that cannot be used, once
// per version of the Secret.
func (m *Manager) reportBrokenSecret(secret *corev1.Secret, err error) {
	if !m.firstReport("secret/"+secret.Namespace, secret.ResourceVersion) {
		return
	}
	shootsInvalid.WithLabelValues("kubeconfig").Inc()
	m.Log.Error(err, "Cannot probe shoot: unusable kubeconfig Secret", "secret", client.ObjectKeyFromObject(secret))
	m.Recorder.Event(secret, corev1.EventTypeWarning, "InvalidKubeconfig", err.Error())
}

// reportBrokenCluster does the same for a Cluster whose spec.shoot cannot be decoded.
func (m *Manager) reportBrokenCluster(cluster *unstructured.Unstructured, err error) {
	if !m.firstReport("cluster/"+cluster.GetName(), cluster.GetResourceVersion()) {
		return
	}
	shootsInvalid.WithLabelValues("cluster").Inc()
	m.Log.Error(err, "Cannot probe shoot: invalid spec.shoot in its Cluster", "cluster", cluster.GetName())
	m.Recorder.Event(cluster, corev1.EventTypeWarning, "InvalidShoot", err.Error())
}

// firstReport records that the object under key was reported at version; false when it was already.
func (m *Manager) firstReport(key, version string) bool {
	m.reportMu.Lock()
	defer m.reportMu.Unlock()
	if m.reported[key] == version {
		return false
	}
	if m.reported == nil {
		m.reported = map[string]string{}
	}
	m.reported[key] = version
	return true
}
