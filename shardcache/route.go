package shardcache

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Kind is a kind of object whose informers hold one share only.
type Kind struct {
	// Share is the share of the group whose role reads the kind.
	Share *Share
	// ClusterScoped: the objects are named after their shoot namespace (Clusters) and filtered by
	// name, here only: the API server selects by namespace or UID, not by name.
	ClusterScoped bool
}

// NewInformerFunc is controller-runtime's cache.Options.NewInformer.
type NewInformerFunc = func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer

// NewInformer returns the informer constructor of a controller-runtime cache whose informers of the
// given kinds hold their share only; an informer of any other kind holds all it selects.
func NewInformer(scheme *runtime.Scheme, kinds map[schema.GroupKind]Kind) NewInformerFunc {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		kind, ok := kinds[gvk.GroupKind()]
		if err != nil || !ok || kind.Share == nil {
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
		i := newInformer(kind.Share, lw, obj, groupResource(gvk), kind.ClusterScoped)
		informer := toolscache.NewSharedIndexInformer(i.listWatch(), obj, resync, indexers)
		i.store = informer.GetIndexer()
		kind.Share.add(i)
		return informer
	}
}
