package prober

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Kinds of the seed the prober reads.
var (
	ClusterGVK = schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"}
	MachineGVK = schema.GroupVersionKind{Group: "machine.sapcloud.io", Version: "v1alpha1", Kind: "Machine"}
)

// EventAction is the action of the prober's Events (events.k8s.io/v1 requires one).
const EventAction = "Probe"

// takeoverJitter bounds the delay of the first probe of a cluster this replica takes over, or that
// is older than the initial delay: enough to spread a handover, short enough not to miss a cycle.
const takeoverJitter = 250 * time.Millisecond

// Manager runs the probes of the shoots this replica owns. It is the Cluster reconciler (start, stop
// and restart by the lifecycle rules) and the prober's sharding.PartitionHandler (start the probes
// of an acquired partition, stop those of a released one before the release goes on).
//
// Scale flows run on their own scheduler (Flows), never in a probe's turn: a flow's waits (initial
// delays, ready waits) are reschedules there and hold no worker, and probes keep their cadence while
// flows run. A shoot has at most one flow; a decision in the other direction replaces it.
//
// Locking: mu guards probes and paused and orders every start and stop of a probe; it is held while a
// stopped probe's run in flight and its flow's step in flight are cancelled and waited for, so neither
// outlives its ownership. flowMu guards flows only and is never held while waiting.
type Manager struct {
	Config *config.ProberConfig
	// Ownership tells which shoots this replica probes; Setup also makes its Guard the Scaler's, so
	// that every scale write is checked right before it is sent.
	Ownership sharding.Ownership
	// Reader reads the seed from the caches: Clusters, kubeconfig Secrets, Machines.
	Reader client.Reader
	// MachineChanges, when set, lets a probe keep the Machines it listed until one of them changes;
	// nil lists them on every cycle.
	MachineChanges *MachineChanges
	Scaler         *scaler.Scaler
	Clients        *ShootClients
	Scheduler      *Scheduler
	// Flows runs the scale flows, on workers of their own.
	Flows *Scheduler
	// Recorder records events.k8s.io Events, with action EventAction: on broken kubeconfig Secrets and
	// Clusters, and on a shoot's first dependent resource about its probe; nil records none.
	Recorder recorder.EventRecorder
	Clock    clock.WithTicker
	Log      logr.Logger

	mu     sync.Mutex
	probes map[string]*shootProbe
	// paused holds the namespaces this replica owns whose probe the lifecycle rules stop or do not start
	// (hibernation, migration, a restore in progress): when it starts, it waits the initial delay.
	paused map[string]string
	// byPartition indexes the namespaces of probes and paused by partition, so that releasing a
	// partition (a fence releases every one) visits only its own shoots.
	byPartition map[int]map[string]struct{}
	// released holds, per partition released here, how long before the release each of its shoots
	// was last probed, for HandoverState; overdue holds those ages of shoots handed to this replica,
	// until their first run is scheduled (see handover.go).
	released map[int]map[string]time.Duration
	overdue  map[string]time.Duration
	// releasedSeen holds, per partition released here, what the probes of its shoots saw of their node
	// leases, for sightingsHandler; handedSeen holds those handed to this replica, until their probe
	// starts (see sightings.go).
	releasedSeen map[int]map[string]handedShoot
	handedSeen   map[string]observation

	flowMu sync.Mutex
	flows  map[string]*scaler.Flow
	// verdicts holds each probed shoot's latest verdict (see publish); a flow writes only while its
	// own is the latest.
	verdicts map[string]verdict

	reportMu sync.Mutex
	reported map[string]string // broken Secret or Cluster → the version already reported
}

var _ sharding.AheadHandler = (*Manager)(nil)

func (m *Manager) interval() time.Duration { return m.Config.ProbeInterval.Duration }

// period is a jittered probe period (see jitterAround).
func (m *Manager) period() time.Duration {
	return jitterAround(m.interval(), *m.Config.BackoffJitterFactor, rand.Float64())
}

// downPeriod is a jittered downRecheck: the period of a probe whose shoot is scaled down.
func (m *Manager) downPeriod() time.Duration {
	return jitterAround(downRecheck, *m.Config.BackoffJitterFactor, rand.Float64())
}

// cycleDeadline bounds one probe cycle: twice the probe timeout, room for the API server probe and
// the lists with one retry, and for the confirming reads.
func (m *Manager) cycleDeadline() time.Duration { return 2 * m.Config.ProbeTimeout.Duration }

// Reconcile brings the probe of one Cluster (named after its shoot namespace) in line with the
// lifecycle rules and this replica's ownership.
func (m *Manager) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, m.sync(ctx, req.Name)
}

// Acquired starts the probes of the clusters in partition p; it does not wait for them. However the
// partition came here, its clusters start at once or after a short jitter (new clusters after
// initialDelay); those handed over with their last probe's age run first in the order of that age,
// the longest unprobed first.
func (m *Manager) Acquired(ctx context.Context, p int, takeover sharding.Takeover) {
	m.takeOverdue(p, takeover.State[HandoverKey])
	m.takeSightings(p, takeover.State[SightingsKey])
	for _, ns := range m.clustersIn(ctx, p) {
		if err := m.sync(ctx, ns); err != nil {
			m.Log.Error(err, "Starting probe of an acquired partition", "namespace", ns, "partition", p)
		}
	}
	m.dropHanded(p)
}

// Handlers returns the sharding handlers of the prober: the Manager, and the one that hands the
// probes' node lease sightings over with the partitions.
func (m *Manager) Handlers() []sharding.PartitionHandler {
	return []sharding.PartitionHandler{m, sightingsHandler{m}}
}

// Released stops the probes of partition p and returns when none of them runs any more; it keeps
// how long ago each was last probed, and its node lease sightings, for HandoverState. It decides
// under mu which probes stop and drops them there, waits for their runs and flow steps in flight
// without mu, so that the reconciles and probes of other partitions never queue behind a slow run,
// and records what they leave under mu again. No probe of p can start in between: the coordinator
// dropped p from what this replica owns before it called Released, and holds p's lock until it returns.
func (m *Manager) Released(p int) {
	m.mu.Lock()
	stopping := map[string]*shootProbe{}
	for ns := range m.byPartition[p] {
		if probe, ok := m.probes[ns]; ok {
			m.dropLocked(ns)
			stopping[ns] = probe
		}
		m.unpauseLocked(ns)
	}
	m.mu.Unlock()
	for ns := range stopping {
		m.endProbe(ns)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for ns, probe := range stopping {
		m.keepAgeLocked(p, ns, probe)
		m.keepSightingsLocked(p, ns, probe)
	}
}

// indexLocked records ns, which has a probe or is paused, under its partition.
func (m *Manager) indexLocked(ns string) {
	p := m.Ownership.Partition(ns)
	if m.byPartition == nil {
		m.byPartition = map[int]map[string]struct{}{}
	}
	if m.byPartition[p] == nil {
		m.byPartition[p] = map[string]struct{}{}
	}
	m.byPartition[p][ns] = struct{}{}
}

// unindexLocked forgets ns once it has neither a probe nor a pause.
func (m *Manager) unindexLocked(ns string) {
	_, probing := m.probes[ns]
	_, paused := m.paused[ns]
	if probing || paused {
		return
	}
	p := m.Ownership.Partition(ns)
	delete(m.byPartition[p], ns)
	if len(m.byPartition[p]) == 0 {
		delete(m.byPartition, p)
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
		m.unpauseLocked(ns)
		return nil
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(ClusterGVK)
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: ns}, cluster); err != nil {
		m.stopLocked(ns)
		m.unpauseLocked(ns)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading cluster %s: %w", ns, err)
	}
	shoot, err := shootOf(cluster)
	if err != nil {
		m.stopLocked(ns)
		m.pauseLocked(ns, UnprotectedInvalidCluster)
		m.reportBrokenCluster(cluster, err)
		return nil
	}
	run, spec, reason := Decide(shoot, m.Config.KCMNodeMonitorGraceDuration.Duration)
	if !run {
		m.Log.V(1).Info("Not probing", "namespace", ns, "reason", reason)
		m.stopLocked(ns)
		label, _ := notRun(shoot)
		m.pauseLocked(ns, label)
		return nil
	}
	if grace, ok := shootGracePeriod(shoot); ok && grace != spec.NodeMonitorGracePeriod {
		m.reportClampedGrace(cluster, grace, spec.NodeMonitorGracePeriod)
	}
	m.startLocked(ns, spec, m.firstRun(ns, cluster, shoot))
	return nil
}

// reportClampedGrace logs and records an Event, once per Cluster version, for a Shoot whose own grace
// period is out of bounds.
func (m *Manager) reportClampedGrace(cluster *unstructured.Unstructured, grace, used time.Duration) {
	if !m.firstReport("grace/"+cluster.GetName(), cluster.GetResourceVersion()) {
		return
	}
	msg := fmt.Sprintf("spec.kubernetes.kubeControllerManager.nodeMonitorGracePeriod %s is out of bounds; the watchdog judges node leases with %s", grace, used)
	m.Log.Info("Shoot grace period clamped", "namespace", cluster.GetName(), "gracePeriod", grace.String(), "used", used.String())
	m.shootEvent(cluster.GetName(), corev1.EventTypeWarning, "GracePeriodClamped", msg)
}

// pauseLocked remembers that the probe of ns does not run, and why: a NotProbed label (a lifecycle
// rule), counted in dwd_shoots_not_probed, or UnprotectedInvalidCluster, counted in
// dwd_shoots_unprotected.
func (m *Manager) pauseLocked(ns, label string) {
	if m.paused == nil {
		m.paused = map[string]string{}
	}
	if before, ok := m.paused[ns]; ok {
		pausedGauge(before).Dec()
	}
	m.paused[ns] = label
	pausedGauge(label).Inc()
	m.indexLocked(ns)
}

// unpauseLocked forgets that the probe of ns was paused.
func (m *Manager) unpauseLocked(ns string) {
	if before, ok := m.paused[ns]; ok {
		pausedGauge(before).Dec()
		delete(m.paused, ns)
	}
	m.unindexLocked(ns)
}

// pausedGauge is the series a paused shoot counts in.
func pausedGauge(label string) prometheus.Gauge {
	if label == UnprotectedInvalidCluster {
		return unprotected.WithLabelValues(label)
	}
	return notProbed.WithLabelValues(label)
}

// firstRun is when a new probe first runs. The original waits initialDelay whenever it creates a
// probe; here it applies where the shoot's control plane is new or coming back: a cluster created
// less than initialDelay ago, a Create or Restore (the end of a migration) that succeeded less than
// initialDelay ago, and a probe that the lifecycle rules kept from running while this replica owned
// the shoot (hibernation, migration, a restore in progress) and now starts (a wake-up). Any other start, such as a takeover from
// another replica or a restart of this one, runs after a short jitter: the shoot was being probed.
func (m *Manager) firstRun(ns string, cluster *unstructured.Unstructured, shoot *Shoot) time.Time {
	now := m.Clock.Now()
	_, paused := m.paused[ns]
	if paused {
		m.unpauseLocked(ns)
	}
	if age, ok := m.overdue[ns]; ok {
		delete(m.overdue, ns)
		return overdueRun(now, age)
	}
	delay := m.Config.InitialDelay.Duration
	due := cluster.GetCreationTimestamp().Add(delay)
	if op := shoot.Status.LastOperation; op != nil && op.LastUpdateTime != nil &&
		(op.Type == LastOperationTypeCreate || op.Type == LastOperationTypeRestore) {
		due = later(due, op.LastUpdateTime.Add(delay))
	}
	if paused {
		// A wake-up, or a repaired Cluster (which may have hidden a hibernation meanwhile): the
		// shoot's leases may not renew yet.
		due = later(due, now.Add(delay))
	}
	if due.After(now) {
		return due
	}
	return now.Add(time.Duration(rand.Int64N(int64(takeoverJitter))))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// startLocked schedules the probe of ns, or gives a running one its new spec (a restart).
func (m *Manager) startLocked(ns string, spec ProbeSpec, at time.Time) {
	handed := m.handedSeen[ns]
	st := &probeState{seen: handed.seen, lastSent: handed.sent}
	delete(m.handedSeen, ns)
	if p, ok := m.probes[ns]; ok {
		if p.spec.Equal(spec) {
			return
		}
		st = p.st
		m.Log.V(1).Info("Restarting probe: node conditions or grace period changed", "namespace", ns)
	} else {
		m.Log.V(1).Info("Starting probe", "namespace", ns, "firstRun", at)
	}
	p := &shootProbe{m: m, namespace: ns, spec: spec, st: st}
	if m.probes == nil {
		m.probes = map[string]*shootProbe{}
	}
	m.probes[ns] = p
	m.indexLocked(ns)
	m.Scheduler.Schedule(ns, at, p.run)
	probesActive.Set(float64(len(m.probes)))
}

// stopLocked stops the probe of ns and its flow, waits for the run and the flow step in flight, and
// drops what it kept; mu must be held (a reconcile of one namespace).
func (m *Manager) stopLocked(ns string) {
	if m.dropLocked(ns) {
		m.endProbe(ns)
	}
}

// dropLocked removes the probe of ns from the running ones, if there is one, and reports whether
// there was; mu must be held. endProbe must follow.
func (m *Manager) dropLocked(ns string) bool {
	if _, ok := m.probes[ns]; !ok {
		return false
	}
	delete(m.probes, ns)
	m.unindexLocked(ns)
	probesActive.Set(float64(len(m.probes)))
	return true
}

// endProbe ends a dropped probe of ns: it removes it from the scheduler and stops its flow, waiting
// for the run and the flow step in flight, then forgets its verdict, client and series. It needs no
// lock, and may wait as long as a run takes to see its cancel.
func (m *Manager) endProbe(ns string) {
	m.Scheduler.Remove(ns)
	m.forgetVerdict(ns)
	m.stopFlow(ns)
	m.Clients.Forget(ns)
	expiredFraction.DeleteLabelValues(ns)
	clockOffset.DeleteLabelValues(ns)
	lastSuccess.DeleteLabelValues(ns)
	m.Log.V(1).Info("Stopped probe", "namespace", ns)
}

// probing reports whether a probe of ns is running here.
func (m *Manager) probing(ns string) bool {
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
	m.event(secret, corev1.EventTypeWarning, "InvalidKubeconfig", err.Error())
}

// reportBrokenCluster does the same for a Cluster whose spec.shoot cannot be decoded.
func (m *Manager) reportBrokenCluster(cluster *unstructured.Unstructured, err error) {
	if !m.firstReport("cluster/"+cluster.GetName(), cluster.GetResourceVersion()) {
		return
	}
	shootsInvalid.WithLabelValues("cluster").Inc()
	m.Log.Error(err, "Cannot probe shoot: invalid spec.shoot in its Cluster", "cluster", cluster.GetName())
	m.event(cluster, corev1.EventTypeWarning, "InvalidShoot", err.Error())
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

// startFlow runs a scale flow of ns in direction dir, acting on the verdict of epoch, on the flow pool,
// unless one in that direction runs already; a flow in the other direction is ended first (its step in
// flight is waited for; the state on the resources lets the new flow finish whatever it left). The
// flow writes only while its verdict is the shoot's latest (see publish).
func (m *Manager) startFlow(ns string, dir scaler.Direction, epoch uint64, why scaler.Reason) {
	m.flowMu.Lock()
	running, ok := m.flows[ns]
	m.flowMu.Unlock()
	if ok && running.Direction() == dir {
		return
	}
	if ok {
		m.Log.Info("Replacing scale flow", "namespace", ns, "from", running.Direction().String(), "to", dir.String())
		m.endFlow(ns, running)
	}
	why.Current = func() bool { return m.current(ns, dir, epoch) }
	f := m.Scaler.NewFlow(ns, dir, why)
	m.flowMu.Lock()
	if m.flows == nil {
		m.flows = map[string]*scaler.Flow{}
	}
	m.flows[ns] = f
	m.flowMu.Unlock()
	m.Flows.Schedule(ns, m.Clock.Now(), m.flowJob(ns, f))
}

// flowJob runs the steps of flow f of ns until it ends.
func (m *Manager) flowJob(ns string, f *scaler.Flow) Job {
	return func(ctx context.Context) time.Duration {
		next, done, err := f.Step(ctx)
		if !done {
			return next
		}
		m.flowMu.Lock()
		if m.flows[ns] == f {
			delete(m.flows, ns)
		}
		m.flowMu.Unlock()
		switch {
		case errors.Is(err, scaler.ErrSuperseded):
			m.Log.V(1).Info("Scale flow ended: its verdict was superseded", "namespace", ns, "direction", f.Direction().String())
		// A refused write was logged by the Scaler and counted by the Ownership: no failure.
		case err != nil && ctx.Err() == nil && !errors.Is(err, scaler.ErrRefused):
			m.Log.Error(err, "Scale flow failed", "namespace", ns, "direction", f.Direction().String())
		}
		return Done
	}
}

// endFlow ends flow f of ns, if it still runs: it waits for its step in flight and gives back the
// budget it reserved.
func (m *Manager) endFlow(ns string, f *scaler.Flow) {
	m.flowMu.Lock()
	if m.flows[ns] != f {
		m.flowMu.Unlock()
		return
	}
	delete(m.flows, ns)
	m.flowMu.Unlock()
	m.Flows.Remove(ns)
	f.Close()
}

// stopFlow stops the flow of ns, if any, and waits for its step in flight.
func (m *Manager) stopFlow(ns string) {
	m.flowMu.Lock()
	f, ok := m.flows[ns]
	m.flowMu.Unlock()
	if ok {
		m.endFlow(ns, f)
		return
	}
	m.Flows.Remove(ns)
}

// shootEvent records an Event about a shoot's probe on its first dependent resource, in the shoot's
// namespace, where its operators look.
func (m *Manager) shootEvent(ns, eventType, reason, message string) {
	if m.Recorder == nil || len(m.Config.DependentResourceInfos) == 0 {
		return
	}
	ref := m.Config.DependentResourceInfos[0].Ref
	var obj client.Object = &appsv1.Deployment{}
	if ref.Kind == "StatefulSet" {
		obj = &appsv1.StatefulSet{}
	}
	obj.SetNamespace(ns)
	obj.SetName(ref.Name)
	m.event(obj, eventType, reason, message)
}

// event records an Event on obj when the Manager has a Recorder.
func (m *Manager) event(obj runtime.Object, eventType, reason, message string) {
	if m.Recorder != nil {
		m.Recorder.Eventf(obj, nil, eventType, reason, EventAction, "%s", message)
	}
}

// observeClockOffset exports the shoot API server's clock offset from its Date header (zero: none),
// against the middle of the request on this replica's clock.
func (m *Manager) observeClockOffset(ns string, date, mid time.Time) {
	if date.IsZero() {
		return
	}
	clockOffset.WithLabelValues(ns).Set(date.Sub(mid).Round(time.Second).Seconds())
}
