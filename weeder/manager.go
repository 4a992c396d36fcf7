package weeder

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"

	"github.com/sharded-dwd/dependency-watchdog/internal/clocktimer"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// HandoverKey is the partition lease annotation that carries the open windows of a partition to its
// next holder.
const HandoverKey = leases.HandoverAnnotationPrefix + "weeder"

// EventAction is the action of the weeder's Events (events.k8s.io/v1 requires one).
const EventAction = "Delete"

// Manager runs the weeding windows of the shoot namespaces this replica owns. It is fed the
// EndpointSlices of the configured services, and it is the weeder's sharding.StateHandler.
type Manager struct {
	Config    *config.WeederConfig
	Ownership sharding.Ownership
	// Client lists and watches pods, and deletes them when Deletes is nil.
	Client kubernetes.Interface
	// Deletes deletes pods on a rate limit of its own, so that the lists and watches of many windows
	// opening at once (a takeover opens one per ready service) cannot hold a delete past its fence.
	Deletes corev1client.PodsGetter
	// Recorder records an events.k8s.io Event, with action EventAction, on every pod deleted.
	Recorder recorder.EventRecorder
	Clock    clock.WithTicker
	Log      logr.Logger
	// Audit, when set, records every pod delete sent, with the moment before it was sent and its
	// result (the ownership audit); nil records nothing.
	Audit *audit.Log
	// DryRun, when set, is the shadow mode (--dry-run): a delete that passes the Guard is recorded there
	// once per pod, and not sent (nor audited).
	DryRun *dryrun.Writes

	tracker   *Tracker
	registry  *Registry
	selectors map[string][]labels.Selector
	// namespaces lists the namespaces with slices of the configured services in partition p.
	namespaces func(p int) []string
	workCtx    context.Context // parent of every window's watches
	cancelWork context.CancelFunc
	wake       chan struct{}

	mu   sync.Mutex
	runs map[ServiceKey]*windowRun
	// handover keeps the windows of a released partition until they are handed over or the partition
	// is acquired again; stoppedAt keeps when its work stopped, until it is acquired again.
	handover  map[int][]Window
	stoppedAt map[int]time.Time
}

var _ sharding.StateHandler = (*Manager)(nil)

// managerDeps are the clients and hooks of a Manager that Setup builds from the controller-runtime
// manager.
type managerDeps struct {
	client     kubernetes.Interface
	deletes    corev1client.PodsGetter
	recorder   recorder.EventRecorder
	log        logr.Logger
	namespaces func(p int) []string
}

// newManager prepares the weeder of opts with deps: opts.MaxWindows bounds the windows that run at
// once, a nil opts.Clock is the real clock.
func newManager(opts Options, deps managerDeps) (*Manager, error) {
	registerMetrics()
	selectors := map[string][]labels.Selector{}
	for service, dependants := range opts.Config.ServicesAndDependantSelectors {
		initServiceMetrics(service)
		for _, s := range dependants.PodSelectors {
			sel, err := metav1.LabelSelectorAsSelector(s)
			if err != nil {
				return nil, fmt.Errorf("pod selector of service %s: %w", service, err)
			}
			selectors[service] = append(selectors[service], sel)
		}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	workCtx, cancel := context.WithCancel(context.Background())
	return &Manager{Config: opts.Config, Ownership: opts.Owner, Client: deps.client, Deletes: deps.deletes,
		Recorder: deps.recorder, Clock: opts.Clock, Log: deps.log, Audit: opts.Audit, DryRun: opts.DryRun, namespaces: deps.namespaces,
		tracker: NewTracker(), registry: NewRegistry(opts.MaxWindows), selectors: selectors,
		workCtx: workCtx, cancelWork: cancel,
		wake: make(chan struct{}, 1), runs: map[ServiceKey]*windowRun{},
		handover: map[int][]Window{}, stoppedAt: map[int]time.Time{}}, nil
}

// Start runs the windows until ctx ends: it ends them at their deadlines and starts queued ones as
// slots free up. On return every window has ended and every watch is gone. It is a manager.Runnable.
func (m *Manager) Start(ctx context.Context) error {
	defer m.cancelWork()
	for {
		m.expire()
		if !m.sleep(ctx) {
			break
		}
	}
	m.stopAll()
	return nil
}

// sleep waits for the next deadline or a change; false when ctx ended.
func (m *Manager) sleep(ctx context.Context) bool {
	var timer <-chan time.Time
	if next, ok := m.registry.NextDeadline(); ok {
		t, armed := clocktimer.At(m.Clock, next)
		if !armed {
			return ctx.Err() == nil
		}
		defer t.Stop()
		timer = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-timer:
	case <-m.wake:
	}
	return true
}

// expire ends the windows whose deadline has passed and starts queued ones in the slots they free.
func (m *Manager) expire() {
	m.mu.Lock()
	ended, started := m.registry.Expire(m.Clock.Now())
	stopping := m.detachLocked(ended...)
	m.startLocked(started)
	m.mu.Unlock()
	stopRuns(stopping)
}

// open opens (or extends) weeding window w, if this replica owns its namespace. The ownership check
// and the start happen under mu, which Released holds while it decides, and the coordinator drops a
// partition from what this replica owns before it calls Released, so no window starts in a namespace
// whose partition is being released. A window opened for a readiness change seen here
// (readinessChange) is logged at info; those opened as part of a partition's start (resumed,
// synthetic) at debug, since a takeover opens one per ready service. The synthetic windows it
// displaces are stopped once mu is released.
func (m *Manager) open(w Window, readinessChange bool) bool {
	var stopping []*windowRun
	defer func() { stopRuns(stopping) }() // runs after the unlock below
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.Ownership.Owns(w.Key.Namespace) {
		return false
	}
	result, displaced := m.registry.Open(w)
	stopping = m.detachLocked(displaced...)
	for _, key := range displaced {
		m.Log.V(1).Info("Synthetic weeding window yielded its slot to a readiness change", "namespace", key.Namespace, "service", key.Service)
	}
	if result == Started || result == Queued {
		windowsOpened.WithLabelValues(w.Key.Service).Inc()
	}
	if result == Started || result == Queued || result == Promoted {
		log := m.Log.V(1)
		if readinessChange {
			log = m.Log
		}
		log.Info("Opened weeding window", "namespace", w.Key.Namespace, "service", w.Key.Service, "until", w.Deadline,
			"state", result.String(), "synthetic", w.Synthetic)
	}
	if result == Started || result == Promoted {
		m.startLocked([]Window{w})
	}
	m.updateGauges()
	m.signal()
	return true
}

// startLocked starts the pod watches of windows in namespaces this replica still owns (a window
// promoted from the queue may belong to a partition being released); mu must be held.
func (m *Manager) startLocked(windows []Window) {
	for _, w := range windows {
		if _, running := m.runs[w.Key]; running || !m.Ownership.Owns(w.Key.Namespace) {
			continue
		}
		m.runs[w.Key] = m.runWindow(w)
	}
	m.updateGauges()
}

// detachLocked takes the runs of the windows keys from the running ones and returns them, for
// stopRuns once mu is released; mu must be held. A released partition's windows cannot start again
// meanwhile (its namespaces are no longer owned). A window ended at its deadline, or a synthetic one
// displaced, can be opened again by a readiness change while its old watches finish a delete in
// flight: both may then send a delete of the same pod, and the second finds it gone (deletes carry
// the pod's UID as a precondition), which is no harm.
func (m *Manager) detachLocked(keys ...ServiceKey) []*windowRun {
	var runs []*windowRun
	for _, key := range keys {
		if run, ok := m.runs[key]; ok {
			runs = append(runs, run)
			delete(m.runs, key)
			m.Log.V(1).Info("Weeding window ended", "namespace", key.Namespace, "service", key.Service)
		}
	}
	m.updateGauges()
	return runs
}

// stopRuns ends the pod watches of detached runs and waits for them (a delete in flight finishes
// first); mu must not be held, so that the other windows never wait behind it.
func stopRuns(runs []*windowRun) {
	for _, run := range runs {
		run.cancel()
	}
	for _, run := range runs {
		run.wg.Wait()
	}
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	stopping := m.detachLocked(slices.Collect(maps.Keys(m.runs))...)
	m.mu.Unlock()
	stopRuns(stopping)
}

func (m *Manager) updateGauges() {
	windowsOpen.Set(float64(len(m.runs)))
	windowsQueued.Set(float64(m.registry.QueuedLen()))
}

func (m *Manager) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Running returns the windows whose watches run now, with their deadlines, sorted.
func (m *Manager) Running() []Window {
	m.mu.Lock()
	defer m.mu.Unlock()
	windows := make([]Window, 0, len(m.runs))
	for _, w := range m.registry.Running() {
		if _, ok := m.runs[w.Key]; ok {
			windows = append(windows, w)
		}
	}
	return windows
}

// handoverWindow is a window as it travels in the partition lease.
type handoverWindow struct {
	Namespace string    `json:"namespace"`
	Service   string    `json:"service"`
	Deadline  time.Time `json:"deadline"`
	Synthetic bool      `json:"synthetic,omitempty"`
}

func encodeWindows(windows []Window) string {
	list := make([]handoverWindow, 0, len(windows))
	for _, w := range windows {
		list = append(list, handoverWindow{Namespace: w.Key.Namespace, Service: w.Key.Service, Deadline: w.Deadline.UTC(), Synthetic: w.Synthetic})
	}
	data, _ := json.Marshal(list)
	return string(data)
}

func decodeWindows(value string) ([]Window, error) {
	var list []handoverWindow
	if err := json.Unmarshal([]byte(value), &list); err != nil {
		return nil, err
	}
	windows := make([]Window, 0, len(list))
	for _, w := range list {
		windows = append(windows, Window{Key: ServiceKey{Namespace: w.Namespace, Service: w.Service}, Deadline: w.Deadline, Synthetic: w.Synthetic})
	}
	return windows, nil
}
