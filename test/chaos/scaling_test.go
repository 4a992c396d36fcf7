package chaos

import (
	"context"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// scaling is one change of a dependent's spec.replicas, as the API server stored it.
type scaling struct {
	at              time.Time
	namespace, name string
	from, to        int32
	resourceVersion string
}

// scaleRecorder records every change of the replicas of every Deployment in the seed, through an
// informer, which lists again after the API server comes back: a change made while it was down
// would still show, as one change.
type scaleRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	changes []scaling
}

func startScaleRecorder(ctx context.Context, cfg *rest.Config) (*scaleRecorder, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &scaleRecorder{cancel: cancel, done: make(chan struct{})}
	factory := informers.NewSharedInformerFactory(cs, 0)
	informer := factory.Apps().V1().Deployments().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: s.update}); err != nil {
		cancel()
		return nil, err
	}
	go func() { defer close(s.done); informer.Run(ctx.Done()) }()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		cancel()
		<-s.done
		return nil, ctx.Err()
	}
	return s, nil
}

func (s *scaleRecorder) update(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.Deployment)
	dep, ok2 := newObj.(*appsv1.Deployment)
	if !ok1 || !ok2 || old.Spec.Replicas == nil || dep.Spec.Replicas == nil || *old.Spec.Replicas == *dep.Spec.Replicas {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, scaling{at: time.Now(), namespace: dep.Namespace, name: dep.Name,
		from: *old.Spec.Replicas, to: *dep.Spec.Replicas, resourceVersion: dep.ResourceVersion})
}

// since returns the changes recorded at or after t.
func (s *scaleRecorder) since(t time.Time) []scaling {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.changes, func(c scaling) bool { return !c.at.Before(t) })
	if i < 0 {
		return nil
	}
	return slices.Clone(s.changes[i:])
}

func (s *scaleRecorder) stop() {
	s.cancel()
	<-s.done
}

// scaleDowns counts the changes to 0 per namespace/name.
func scaleDowns(changes []scaling) map[string]int {
	n := map[string]int{}
	for _, c := range changes {
		if c.to == 0 {
			n[c.namespace+"/"+c.name]++
		}
	}
	return n
}

// spurious returns the scale-downs of shoots not in melted.
func spurious(changes []scaling, melted map[string]bool) []scaling {
	var out []scaling
	for _, c := range changes {
		if c.to == 0 && !melted[c.namespace] {
			out = append(out, c)
		}
	}
	return out
}
