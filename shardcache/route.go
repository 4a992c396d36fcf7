package shardcache

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NewInformerFunc is controller-runtime's cache.Options.NewInformer.
type NewInformerFunc = func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer

// NewInformer returns the informer constructor of a controller-runtime cache whose informers of the
// given namespaced kinds hold their group's share only; an informer of any other kind holds all it
// selects.
func NewInformer(scheme *runtime.Scheme, shares map[schema.GroupKind]*Share) NewInformerFunc {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		share := shares[gvk.GroupKind()]
		if err != nil || share == nil {
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
		i := newInformer(share, lw, obj, groupResource(gvk))
		informer := toolscache.NewSharedIndexInformer(i.listWatch(), obj, resync, indexers)
		i.store = informer.GetIndexer()
		share.add(i)
		return informer
	}
}
