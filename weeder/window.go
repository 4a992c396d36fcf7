package weeder

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// windowRun is the pod watches of one running window.
type windowRun struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stop ends the window's watches and waits for them.
func (r *windowRun) stop() {
	r.cancel()
	r.wg.Wait()
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

// watchPods weeds the pods of key's namespace that match sel until ctx ends: first those there now,
// then every pod the watch reports added or changed.
func (m *Manager) watchPods(ctx context.Context, key ServiceKey, sel labels.Selector) {
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
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if pod, isPod := e.Object.(*corev1.Pod); isPod && (e.Type == watch.Added || e.Type == watch.Modified) {
				m.weed(ctx, key, pod)
			}
		}
	}
}

// weed deletes pod if it is stuck in CrashLoopBackOff, only if it is still the same pod (its UID).
func (m *Manager) weed(ctx context.Context, key ServiceKey, pod *corev1.Pod) {
	if !ShouldWeed(pod) {
		return
	}
	uid := pod.UID
	err := m.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		podsDeleted.WithLabelValues(key.Service).Inc()
		m.Log.Info("Deleted pod stuck in CrashLoopBackOff", "pod", pod.Namespace+"/"+pod.Name, "service", key.Service)
		m.Recorder.Event(pod, corev1.EventTypeNormal, "CrashLoopingPodDeleted",
			fmt.Sprintf("Deleted: stuck in CrashLoopBackOff while its dependency, service %s, is ready again", key.Service))
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil:
		// Gone already, replaced by a pod with another UID, or the window has ended.
	default:
		deleteFailures.WithLabelValues(key.Service).Inc()
		m.Log.Error(err, "Deleting pod stuck in CrashLoopBackOff", "pod", pod.Namespace+"/"+pod.Name)
	}
}
