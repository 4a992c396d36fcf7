package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// DependentCache caches, seed-wide, only the dependent resources the prober scales: one informer per
// configured kind and name, selected by name on the server side, each object trimmed to what the scale
// flows read (the watchdog's annotations, replicas, ready replicas). It is the reader of the scaler's
// client, so that a probe knows from memory whether a scale flow is needed.
//
// It is a manager.Runnable.
type DependentCache struct {
	caches map[dependentKey]cache.Cache
	// marks follows, from the informers' events, which dependents carry the meltdown marker.
	marks *dependentMarks
}

// dependentKey is a configured resource: its kind and name.
type dependentKey struct{ kind, name string }

var _ client.Reader = (*DependentCache)(nil)

// NewDependentCache builds the caches of the configured resources; newInformer, when set, builds
// their informers (cache.Options.NewInformer).
func NewDependentCache(cfg *rest.Config, scheme *runtime.Scheme, infos []config.DependentResourceInfo,
	newInformer func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer) (*DependentCache, error) {
	d := &DependentCache{caches: map[dependentKey]cache.Cache{}, marks: &dependentMarks{}}
	for _, info := range infos {
		obj, err := newDependent(info.Ref.Kind)
		if err != nil {
			return nil, err
		}
		c, err := cache.New(cfg, cache.Options{Scheme: scheme, NewInformer: newInformer, ByObject: map[client.Object]cache.ByObject{
			obj: {Field: fields.OneTermEqualSelector("metadata.name", info.Ref.Name), Transform: trimDependent},
		}})
		if err != nil {
			return nil, fmt.Errorf("cache of %s %s: %w", info.Ref.Kind, info.Ref.Name, err)
		}
		key := dependentKey{info.Ref.Kind, info.Ref.Name}
		informer, err := c.GetInformer(context.Background(), obj)
		if err != nil {
			return nil, fmt.Errorf("informer of %s %s: %w", info.Ref.Kind, info.Ref.Name, err)
		}
		if err := d.marks.follow(informer, key); err != nil {
			return nil, fmt.Errorf("informer of %s %s: %w", info.Ref.Kind, info.Ref.Name, err)
		}
		d.caches[key] = c
	}
	return d, nil
}

func newDependent(kind string) (client.Object, error) {
	switch kind {
	case "Deployment":
		return &appsv1.Deployment{}, nil
	case "StatefulSet":
		return &appsv1.StatefulSet{}, nil
	}
	return nil, fmt.Errorf("kind %q cannot be scaled", kind)
}

// Start runs every cache until ctx ends.
func (d *DependentCache) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(d.caches))
	for _, c := range d.caches {
		wg.Go(func() { errs <- c.Start(ctx) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// WaitForCacheSync waits until every cache has synced.
func (d *DependentCache) WaitForCacheSync(ctx context.Context) bool {
	for _, c := range d.caches {
		if !c.WaitForCacheSync(ctx) {
			return false
		}
	}
	return true
}

// Get reads a configured resource from its cache.
func (d *DependentCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c, err := d.cacheFor(obj, key.Name)
	if err != nil {
		return err
	}
	return c.Get(ctx, key, obj, opts...)
}

// List is not served: the prober only reads the configured resources by name.
func (d *DependentCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the dependent cache serves Get by name only")
}

func (d *DependentCache) cacheFor(obj client.Object, name string) (cache.Cache, error) {
	var kind string
	switch obj.(type) {
	case *appsv1.Deployment:
		kind = "Deployment"
	case *appsv1.StatefulSet:
		kind = "StatefulSet"
	}
	c, ok := d.caches[dependentKey{kind, name}]
	if !ok {
		return nil, fmt.Errorf("%T %s is not a configured dependent resource", obj, name)
	}
	return c, nil
}

// trimDependent keeps a Deployment's or StatefulSet's identity, annotations, replicas and ready replicas.
func trimDependent(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: trimMeta(o.ObjectMeta),
			Spec:   appsv1.DeploymentSpec{Replicas: o.Spec.Replicas},
			Status: appsv1.DeploymentStatus{ReadyReplicas: o.Status.ReadyReplicas, Replicas: o.Status.Replicas, AvailableReplicas: o.Status.AvailableReplicas}}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: trimMeta(o.ObjectMeta),
			Spec:   appsv1.StatefulSetSpec{Replicas: o.Spec.Replicas},
			Status: appsv1.StatefulSetStatus{ReadyReplicas: o.Status.ReadyReplicas, Replicas: o.Status.Replicas, AvailableReplicas: o.Status.AvailableReplicas}}, nil
	}
	return obj, nil
}

// trimMeta keeps the identity and the watchdog's own annotations.
func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	var annotations map[string]string
	for k, v := range m.Annotations {
		if strings.HasPrefix(k, watchdogAnnotationPrefix) {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
		}
	}
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Annotations: annotations}
}

// watchdogAnnotationPrefix prefixes the annotations the scale flows read and write.
const watchdogAnnotationPrefix = "dependency-watchdog.gardener.cloud/"
