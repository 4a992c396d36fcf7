package prober

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const lifecycleDefaultGrace = 40 * time.Second

// lifecycleShoot is a shoot with one worker and the given last operation ("" type: none).
func lifecycleShoot(opType, opState string, mutate ...func(*Shoot)) *Shoot {
	s := &Shoot{Spec: ShootSpec{Provider: Provider{Workers: []Worker{{Name: "pool-a"}}}}}
	if opType != "" {
		s.Status.LastOperation = &LastOperation{Type: opType, State: opState}
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func deleting(s *Shoot)         { s.Metadata.DeletionTimestamp = ptr.To(metav1.Now()) }
func hibernationOn(s *Shoot)    { s.Spec.Hibernation = &Hibernation{Enabled: ptr.To(true)} }
func hibernationOff(s *Shoot)   { s.Spec.Hibernation = &Hibernation{Enabled: ptr.To(false)} }
func hibernated(s *Shoot)       { s.Status.IsHibernated = true }
func workerless(s *Shoot)       { s.Spec.Provider.Workers = nil }
func hibernationUnset(s *Shoot) { s.Spec.Hibernation = &Hibernation{} }

func TestDecideLifecycleTable(t *testing.T) {
	const (
		succeeded  = "Succeeded"
		processing = "Processing"
	)
	tests := []struct {
		name   string
		shoot  *Shoot
		run    bool
		reason string
	}{
		{"cluster gone", nil, false, "cluster gone"},
		{"no last operation", lifecycleShoot("", ""), false, "shoot has no last operation"},
		{"creation in progress", lifecycleShoot("Create", processing), false, "last operation Create is Processing"},
		{"creation pending", lifecycleShoot("Create", "Pending"), false, "last operation Create is Pending"},
		{"creation failed", lifecycleShoot("Create", "Failed"), false, "last operation Create is Failed"},
		{"creation error", lifecycleShoot("Create", "Error"), false, "last operation Create is Error"},
		{"create succeeded", lifecycleShoot("Create", succeeded), true, ""},
		{"reconcile succeeded", lifecycleShoot("Reconcile", succeeded), true, ""},
		{"reconcile processing", lifecycleShoot("Reconcile", processing), true, ""},
		{"reconcile failed", lifecycleShoot("Reconcile", "Failed"), true, ""},
		{"reconcile error", lifecycleShoot("Reconcile", "Error"), true, ""},
		{"reconcile aborted", lifecycleShoot("Reconcile", "Aborted"), true, ""},
		{"restore processing", lifecycleShoot("Restore", processing), false, "last operation Restore is Processing"},
		{"restore failed", lifecycleShoot("Restore", "Failed"), false, "last operation Restore is Failed"},
		{"restore succeeded", lifecycleShoot("Restore", succeeded), true, ""},
		{"migrate processing", lifecycleShoot("Migrate", processing), false, "shoot is being migrated"},
		{"migrate succeeded", lifecycleShoot("Migrate", succeeded), false, "shoot is being migrated"},
		{"migrate failed", lifecycleShoot("Migrate", "Failed"), false, "shoot is being migrated"},
		{"delete operation", lifecycleShoot("Delete", processing), false, "last operation Delete is Processing"},
		{"unknown operation", lifecycleShoot("Frobnicate", succeeded), false, "last operation Frobnicate is Succeeded"},
		{"deletion", lifecycleShoot("Reconcile", succeeded, deleting), false, "shoot is being deleted"},
		{"deletion while migrating", lifecycleShoot("Migrate", processing, deleting), false, "shoot is being deleted"},
		{"hibernating", lifecycleShoot("Reconcile", processing, hibernationOn), false, "hibernation is enabled"},
		{"hibernated", lifecycleShoot("Reconcile", succeeded, hibernationOn, hibernated), false, "hibernation is enabled"},
		{"waking up", lifecycleShoot("Reconcile", processing, hibernationOff, hibernated), false, "shoot is waking up from hibernation"},
		{"waking up, hibernation unset", lifecycleShoot("Reconcile", processing, hibernated), false, "shoot is waking up from hibernation"},
		{"woken up", lifecycleShoot("Reconcile", succeeded, hibernationOff), true, ""},
		{"hibernation enabled unset", lifecycleShoot("Reconcile", succeeded, hibernationUnset), true, ""},
		{"workerless", lifecycleShoot("Reconcile", succeeded, workerless), false, "shoot has no workers"},
		{"workerless without last operation", lifecycleShoot("", "", workerless), false, "shoot has no workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, spec, reason := Decide(tt.shoot, lifecycleDefaultGrace)
			assert.Equal(t, tt.run, run)
			assert.Equal(t, tt.reason, reason)
			if !run {
				assert.Equal(t, ProbeSpec{}, spec, "no spec when not running")
			}
		})
	}
}

func TestDecideProbeSpec(t *testing.T) {
	withWorkers := func(workers ...Worker) func(*Shoot) {
		return func(s *Shoot) { s.Spec.Provider.Workers = workers }
	}
	withGrace := func(d time.Duration) func(*Shoot) {
		return func(s *Shoot) {
			s.Spec.Kubernetes.KubeControllerManager = &KubeControllerManager{NodeMonitorGracePeriod: &metav1.Duration{Duration: d}}
		}
	}
	mcm := func(conditions ...string) *MachineControllerManager {
		return &MachineControllerManager{NodeConditions: conditions}
	}
	defaults := []string{"DiskPressure", "KernelDeadlock", "NetworkUnavailable", "ReadonlyFilesystem"}
	tests := []struct {
		name  string
		shoot *Shoot
		want  ProbeSpec
	}{
		{"defaults", lifecycleShoot("Reconcile", "Succeeded"),
			ProbeSpec{NodeMonitorGracePeriod: lifecycleDefaultGrace, WorkerNodeConditions: map[string][]string{"pool-a": defaults}}},
		{"shoot grace period", lifecycleShoot("Reconcile", "Succeeded", withGrace(2*time.Minute)),
			ProbeSpec{NodeMonitorGracePeriod: 2 * time.Minute, WorkerNodeConditions: map[string][]string{"pool-a": defaults}}},
		{"a tiny shoot grace period is clamped to 16s", lifecycleShoot("Reconcile", "Succeeded", withGrace(time.Second)),
			ProbeSpec{NodeMonitorGracePeriod: 16 * time.Second, WorkerNodeConditions: map[string][]string{"pool-a": defaults}}},
		{"a huge shoot grace period is clamped to 10m", lifecycleShoot("Reconcile", "Succeeded", withGrace(1000*time.Hour)),
			ProbeSpec{NodeMonitorGracePeriod: 10 * time.Minute, WorkerNodeConditions: map[string][]string{"pool-a": defaults}}},
		{"zero grace period uses the default", lifecycleShoot("Reconcile", "Succeeded", withGrace(0)),
			ProbeSpec{NodeMonitorGracePeriod: lifecycleDefaultGrace, WorkerNodeConditions: map[string][]string{"pool-a": defaults}}},
		{"negative grace period uses the default", lifecycleShoot("Reconcile", "Succeeded", withGrace(-time.Second)),
			ProbeSpec{NodeMonitorGracePeriod: lifecycleDefaultGrace, WorkerNodeConditions: map[string][]string{"pool-a": defaults}}},
		{"kube-controller-manager without grace period", lifecycleShoot("Reconcile", "Succeeded", func(s *Shoot) {
			s.Spec.Kubernetes.KubeControllerManager = &KubeControllerManager{}
		}), ProbeSpec{NodeMonitorGracePeriod: lifecycleDefaultGrace, WorkerNodeConditions: map[string][]string{"pool-a": defaults}}},
		{"per-pool conditions sorted and de-duplicated", lifecycleShoot("Reconcile", "Succeeded", withWorkers(
			Worker{Name: "a", MachineControllerManager: mcm("ReadonlyFilesystem", "Custom", "Custom")},
			Worker{Name: "b", MachineControllerManager: mcm()},
			Worker{Name: "c"},
		)), ProbeSpec{NodeMonitorGracePeriod: lifecycleDefaultGrace, WorkerNodeConditions: map[string][]string{
			"a": {"Custom", "ReadonlyFilesystem"}, "b": defaults, "c": defaults,
		}}},
		{"duplicate pool names get the union", lifecycleShoot("Reconcile", "Succeeded", withWorkers(
			Worker{Name: "a", MachineControllerManager: mcm("Z")},
			Worker{Name: "a", MachineControllerManager: mcm("Y", "Z")},
		)), ProbeSpec{NodeMonitorGracePeriod: lifecycleDefaultGrace, WorkerNodeConditions: map[string][]string{"a": {"Y", "Z"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, spec, reason := Decide(tt.shoot, lifecycleDefaultGrace)
			assert.True(t, run, reason)
			assert.Equal(t, tt.want, spec)
		})
	}
}

func TestDecideDoesNotAliasTheShoot(t *testing.T) {
	conditions := []string{"B", "A"}
	shoot := lifecycleShoot("Reconcile", "Succeeded", func(s *Shoot) {
		s.Spec.Provider.Workers = []Worker{{Name: "a", MachineControllerManager: &MachineControllerManager{NodeConditions: conditions}}}
	})
	_, spec, _ := Decide(shoot, lifecycleDefaultGrace)
	assert.Equal(t, []string{"B", "A"}, conditions, "the shoot's list is not sorted in place")
	spec.WorkerNodeConditions["a"][0] = "changed"
	_, again, _ := Decide(shoot, lifecycleDefaultGrace)
	assert.Equal(t, []string{"A", "B"}, again.WorkerNodeConditions["a"])
	assert.Equal(t, []string{"KernelDeadlock", "ReadonlyFilesystem", "DiskPressure", "NetworkUnavailable"}, DefaultNodeConditions)
}

func TestProbeSpecEqual(t *testing.T) {
	base := func() ProbeSpec {
		return ProbeSpec{NodeMonitorGracePeriod: time.Minute, WorkerNodeConditions: map[string][]string{"a": {"X", "Y"}, "b": {"Z"}}}
	}
	tests := []struct {
		name   string
		change func(*ProbeSpec)
		equal  bool
	}{
		{"same", func(*ProbeSpec) {}, true},
		{"grace period", func(s *ProbeSpec) { s.NodeMonitorGracePeriod = 2 * time.Minute }, false},
		{"a pool's conditions", func(s *ProbeSpec) { s.WorkerNodeConditions["a"] = []string{"X"} }, false},
		{"a condition renamed", func(s *ProbeSpec) { s.WorkerNodeConditions["b"] = []string{"W"} }, false},
		{"a pool added", func(s *ProbeSpec) { s.WorkerNodeConditions["c"] = []string{"Z"} }, false},
		{"a pool removed", func(s *ProbeSpec) { delete(s.WorkerNodeConditions, "b") }, false},
		{"a pool renamed", func(s *ProbeSpec) {
			s.WorkerNodeConditions["c"] = s.WorkerNodeConditions["b"]
			delete(s.WorkerNodeConditions, "b")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base()
			tt.change(&changed)
			assert.Equal(t, tt.equal, base().Equal(changed))
			assert.Equal(t, tt.equal, changed.Equal(base()), "symmetric")
		})
	}
	t.Run("nil and empty maps", func(t *testing.T) {
		assert.True(t, ProbeSpec{}.Equal(ProbeSpec{WorkerNodeConditions: map[string][]string{}}))
	})
}

func TestARunningProbeIsKeptOnTheSameSpecAndRestartedWithItsStateOnAnother(t *testing.T) {
	registerMetrics()
	clk := clocktesting.NewFakeClock(time.Now())
	m := &Manager{Ownership: partitionOwnership{}, Clock: clk, Log: logr.Discard(),
		Scheduler: NewScheduler(clk, 1, nil), Flows: NewScheduler(clk, 1, nil), Clients: &ShootClients{}}
	const ns = "shoot--p--s"
	_, spec, _ := Decide(lifecycleShoot("Reconcile", "Succeeded"), lifecycleDefaultGrace)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.startLocked(ns, spec, clk.Now())
	first := m.probes[ns]
	require.NotNil(t, first)

	m.startLocked(ns, spec, clk.Now())
	assert.Same(t, first, m.probes[ns], "the same spec keeps the running probe")

	other := ProbeSpec{NodeMonitorGracePeriod: time.Minute, WorkerNodeConditions: spec.WorkerNodeConditions}
	m.startLocked(ns, other, clk.Now())
	assert.NotSame(t, first, m.probes[ns], "another spec restarts it")
	assert.Equal(t, other, m.probes[ns].spec)
	assert.Same(t, first.st, m.probes[ns].st, "the restarted probe keeps what the probe had seen")
	m.stopLocked(ns)
}
