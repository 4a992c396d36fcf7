package weeder

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/dryrun"
)

// windowRun is the pod watches of one running window.
type windowRun struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// runWindow starts one pod watch per pod selector of the window's service.
func (m *Manager) runWindow(w Window) *windowRun {
	ctx, cancel := context.WithCancel(m.workCtx)
	run := &windowRun{cancel: cancel}
	for _, sel := range m.selectors[w.Key.Service] {
		run.wg.Go(func() { m.watchPods(ctx, w.Key, sel) })
	}
	return run
}

// Re-watch back-off of a pod watch: the first retry waits rewatchBaseDelay, each failure in a row
// doubles the wait up to rewatchMaxDelay. A watch that ran for rewatchMaxDelay or longer was healthy,
// and its end starts over at rewatchBaseDelay.
const (
	rewatchBaseDelay = 500 * time.Millisecond
	rewatchMaxDelay  = 30 * time.Second
)

// rewatchDelay is the wait before the next list and watch, after a round that lasted lasted and
// whose own wait was previous (0 for the first round).
func rewatchDelay(previous, lasted time.Duration) time.Duration {
	if previous == 0 || lasted >= rewatchMaxDelay {
		return rewatchBaseDelay
	}
	return min(2*previous, rewatchMaxDelay)
}

// watchPods weeds the pods of key's namespace that match sel until ctx ends. Each round lists the
// pods and weeds those there now, then weeds every pod a watch from that list reports added or
// changed. A round ends when the list fails or the watch closes (a RetryWatcher closes on a 410 Gone);
// the next one starts after a back-off, so that the selector is weeded for the whole window.
func (m *Manager) watchPods(ctx context.Context, key ServiceKey, sel labels.Selector) {
	var delay time.Duration
	for {
		started := m.Clock.Now()
		m.listAndWatchPods(ctx, key, sel)
		delay = rewatchDelay(delay, m.Clock.Since(started))
		if !m.wait(ctx, wait.Jitter(delay, 0.2)) {
			return
		}
		m.Log.V(1).Info("Re-listing pods for a weeding window", "namespace", key.Namespace, "service", key.Service, "selector", sel.String())
	}
}

// wait waits for d on the manager's clock; false when ctx ended first.
func (m *Manager) wait(ctx context.Context, d time.Duration) bool {
	t := m.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// listAndWatchPods is one round of watchPods: it returns when ctx ends, the list fails or the watch closes.
func (m *Manager) listAndWatchPods(ctx context.Context, key ServiceKey, sel labels.Selector) {
	pods := m.Client.CoreV1().Pods(key.Namespace)
	opts := metav1.ListOptions{LabelSelector: sel.String()}
	list, err := pods.List(ctx, opts)
	if err != nil {
		if ctx.Err() == nil {
			m.Log.Error(err, "Listing pods for a weeding window", "namespace", key.Namespace, "service", key.Service, "selector", opts.LabelSelector)
		}
		return
	}
	for i := range list.Items {
		m.weed(ctx, key, &list.Items[i])
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = opts.LabelSelector
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		m.Log.Error(err, "Watching pods for a weeding window", "namespace", key.Namespace, "service", key.Service)
		return
	}
	defer w.Stop()
	m.weedWatched(ctx, key, w.ResultChan())
}

// weedWatched weeds the pods that events reports added or changed until ctx ends or events closes.
func (m *Manager) weedWatched(ctx context.Context, key ServiceKey, events <-chan watch.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			switch pod, isPod := e.Object.(*corev1.Pod); {
			case isPod && (e.Type == watch.Added || e.Type == watch.Modified):
				m.weed(ctx, key, pod)
			case e.Type == watch.Error:
				m.Log.V(1).Info("Pod watch of a weeding window reported an error", "namespace", key.Namespace, "service", key.Service,
					"error", apierrors.FromObject(e.Object).Error())
			}
		}
	}
}

// weed deletes pod if it is stuck in CrashLoopBackOff, only if this replica may act on its namespace
// right now (Ownership.Guard) and only if the pod is still the one observed: its UID and its
// resourceVersion, so that a pod that recovered, or changed in any way, since is left alone.
//
// A delete that fails for a reason that may pass (the client's rate limiter could not send it before
// the fence moment, a 429, a 5xx, a timeout) is tried again after deleteRetryDelays, each time guarded
// anew, while the window is open: the watch reports the pod again only when it changes, which a pod in
// CrashLoopBackOff may not do for minutes.
func (m *Manager) weed(ctx context.Context, key ServiceKey, pod *corev1.Pod) {
	if !ShouldWeed(pod) {
		return
	}
	for attempt := 0; ; attempt++ {
		retry := m.tryDelete(ctx, key, pod, attempt == len(deleteRetryDelays))
		if !retry {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-m.Clock.After(deleteRetryDelays[attempt]):
		}
	}
}

// deleteRetryDelays are the waits before the second and later attempts of a pod delete.
var deleteRetryDelays = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// tryDelete sends pod's delete once, guarded; it reports whether to try again, unless last.
func (m *Manager) tryDelete(ctx context.Context, key ServiceKey, pod *corev1.Pod, last bool) (retry bool) {
	guarded, cancel, err := m.Ownership.Guard(ctx, pod.Namespace)
	if err != nil {
		m.Log.Info("Not deleting pod stuck in CrashLoopBackOff: this replica may not act on its namespace now",
			"pod", klog.KObj(pod), "service", key.Service, "reason", err.Error())
		return false
	}
	defer cancel()
	if m.DryRun != nil {
		if m.DryRun.Once("pod/"+string(pod.UID), dryrun.KindPodDelete, dryrun.DirectionNone, pod, "service", key.Service) {
			m.deletedEvent(pod, key) // the Recorder of a dry run records none, and counts it
		}
		return false
	}
	err = m.delete(guarded, pod)
	if !last && err != nil && ctx.Err() == nil && mayPass(err) {
		m.Log.V(1).Info("Pod delete failed; trying again", "pod", klog.KObj(pod), "service", key.Service, "error", err.Error())
		return true
	}
	m.deleted(ctx, guarded, key, pod, err)
	return false
}

// delete sends pod's delete under the guarded context, recorded in the Audit before the request and
// with its result after. A delete whose context ended before the moment recorded as its send is not
// sent.
func (m *Manager) delete(guarded context.Context, pod *corev1.Pod) error {
	sent := m.Audit.Now()
	if err := guarded.Err(); err != nil {
		return err
	}
	w := m.Audit.Sending(audit.Write{Kind: audit.KindDelete, Namespace: pod.Namespace, Object: "Pod/" + pod.Name,
		Partition: m.Ownership.Partition(pod.Namespace), Sent: sent})
	err := m.pods(pod.Namespace).Delete(guarded, pod.Name, metav1.DeleteOptions{Preconditions: observed(pod)})
	m.Audit.Wrote(w, err)
	return err
}

// mayPass reports whether a failed delete may succeed when sent again: not when the pod changed or is
// gone, nor when the API server refuses it for what it is.
func mayPass(err error) bool {
	return !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) &&
		!apierrors.IsUnauthorized(err) && !apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err) && !apierrors.IsMethodNotSupported(err)
}

// pods returns the pods of namespace on the delete client, else the watch client.
func (m *Manager) pods(namespace string) corev1client.PodInterface {
	if m.Deletes != nil {
		return m.Deletes.Pods(namespace)
	}
	return m.Client.CoreV1().Pods(namespace)
}

// observed returns the preconditions that let a delete hit pod only as it was observed.
func observed(pod *corev1.Pod) *metav1.Preconditions {
	uid, rv := pod.UID, pod.ResourceVersion
	preconditions := &metav1.Preconditions{UID: &uid}
	if rv != "" {
		preconditions.ResourceVersion = &rv
	}
	return preconditions
}

// deletedEvent records the Event of pod's delete, when there is a Recorder.
func (m *Manager) deletedEvent(pod *corev1.Pod, key ServiceKey) {
	if m.Recorder != nil {
		m.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, "CrashLoopingPodDeleted", EventAction,
			"Deleted: stuck in CrashLoopBackOff while its dependency, service %s, is ready again", key.Service)
	}
}

// deleted reports the outcome of pod's delete, sent under guarded (derived from ctx).
func (m *Manager) deleted(ctx, guarded context.Context, key ServiceKey, pod *corev1.Pod, err error) {
	switch {
	case err == nil:
		podsDeleted.WithLabelValues(key.Service).Inc()
		m.Log.Info("Deleted pod stuck in CrashLoopBackOff", "pod", klog.KObj(pod), "service", key.Service)
		m.deletedEvent(pod, key)
	case apierrors.IsConflict(err):
		// Replaced (another UID) or changed since observed; its next change comes through the watch.
		deleteConflicts.WithLabelValues(key.Service).Inc()
		m.Log.V(1).Info("Pod changed since it was seen in CrashLoopBackOff: not deleted", "pod", klog.KObj(pod),
			"service", key.Service, "resourceVersion", pod.ResourceVersion)
	case apierrors.IsNotFound(err) || ctx.Err() != nil:
		// Gone already, or the window has ended.
	case guarded.Err() != nil:
		m.Log.Info("Pod delete cut off at this replica's fence moment; it may or may not have been applied",
			"pod", klog.KObj(pod), "service", key.Service)
	default:
		deleteFailures.WithLabelValues(key.Service).Inc()
		m.Log.Error(err, "Deleting pod stuck in CrashLoopBackOff", "pod", klog.KObj(pod), "service", key.Service)
	}
}
