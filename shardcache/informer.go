package shardcache

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// informer is the list and watch of one kind of a share's shoots, and what its store was given.
type informer struct {
	share    *Share
	inner    toolscache.ListerWatcherWithContext
	resource string
	// newObject returns an empty object of the kind, for tombstones and bookmarks.
	newObject func() runtime.Object
	// store is the informer's indexer, where Warm looks for what the stream gave.
	store toolscache.Store

	mu sync.Mutex
	// held is the share the store holds all objects of (its List, or its stream's initial events
	// once they ended); nil before.
	held *shareState
	// initial: a watch-list's initial events are being received; held is not complete yet.
	initial bool
	// listing is the share of a paged List in progress, so that every page selects the same.
	listing *shareState
	// forwarded is the resource version of every object the store was given, by its store key.
	forwarded map[string]string
	// pending are the keys of objects of newly held partitions not yet seen in the store.
	pending map[string]struct{}
	// counted is the size of forwarded last exported (count).
	counted int
	// torn is set while a change of share is recorded but not all of its events reached the store; a
	// stream stopped then leaves forwarded ahead of the store, and the next watch makes the reflector
	// list again.
	torn bool
}

func newInformer(share *Share, lw toolscache.ListerWatcher, example runtime.Object, resource string) *informer {
	i := &informer{share: share, inner: toolscache.ToListerWatcherWithContext(lw), resource: resource,
		forwarded: map[string]string{}, pending: map[string]struct{}{}}
	if u, ok := example.(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		i.newObject = func() runtime.Object {
			o := &unstructured.Unstructured{}
			o.SetGroupVersionKind(gvk)
			return o
		}
	} else {
		t := reflect.TypeOf(example).Elem()
		i.newObject = func() runtime.Object { return reflect.New(t).Interface().(runtime.Object) }
	}
	return i
}

// listWatch is the informer's ListerWatcher for the shared informer.
func (i *informer) listWatch() *toolscache.ListWatch {
	return &toolscache.ListWatch{ListWithContextFunc: i.list, WatchFuncWithContext: i.watch}
}

// shardKey is what decides an object's partition: its namespace.
func (i *informer) shardKey(o metav1.Object) string {
	return o.GetNamespace()
}

// selects reports whether the informer asks the API server for state's share.
func (i *informer) selects(state *shareState) bool {
	return i.share.server && state.selector != ""
}

// withSelector returns opts with state's shard selector where the informer asks the server for it.
func (i *informer) withSelector(opts metav1.ListOptions, state *shareState) metav1.ListOptions {
	if i.selects(state) {
		opts.ShardSelector = state.selector
	}
	return opts
}

// list is the reflector's List: the share's objects only, every page of one List selecting the same
// share; the store then holds that share.
func (i *informer) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	i.mu.Lock()
	if opts.Continue == "" || i.listing == nil {
		i.listing, _ = i.share.state()
	}
	state := i.listing
	i.mu.Unlock()
	obj, err := i.inner.ListWithContext(ctx, i.withSelector(opts, state))
	if err != nil {
		return nil, err
	}
	kept, err := i.filterList(obj, state, "list")
	if err != nil {
		return nil, err
	}
	last := listContinue(obj) == ""
	i.mu.Lock()
	defer i.mu.Unlock()
	if opts.Continue == "" {
		i.forwarded, i.pending, i.torn = map[string]string{}, map[string]struct{}{}, false
	}
	for _, o := range kept {
		key := storeKey(o)
		i.forwarded[key] = o.GetResourceVersion()
		i.pending[key] = struct{}{}
	}
	if last {
		i.held, i.initial, i.listing = state, false, nil
	}
	i.count()
	return obj, nil
}

// filterList drops the objects of a listed page outside state's share, keeping the list's resource
// version and continue token, and returns those kept. A typed list answered without the shard info of
// the selector it was sent tells that the server ignored it; an unstructured one (a custom resource)
// cannot carry shard info (Kubernetes 1.36 sets it only on lists that implement
// metav1.ShardedListInterface, which UnstructuredList does not), so there only an object outside the
// selector tells it.
func (i *informer) filterList(obj runtime.Object, state *shareState, via string) ([]metav1.Object, error) {
	_, unstructuredList := obj.(*unstructured.UnstructuredList)
	if i.selects(state) && !unstructuredList && listShardSelector(obj) != state.selector {
		i.share.ignored(i.resource, via+" without shard info")
	}
	items, err := meta.ExtractListWithAlloc(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the %s list: %w", i.resource, err)
	}
	keptObjects := items[:0]
	var kept []metav1.Object
	outside := false
	for _, item := range items {
		o, err := meta.Accessor(item)
		if err != nil {
			return nil, fmt.Errorf("reading a listed %s: %w", i.resource, err)
		}
		if !state.holds(i.share.partitions, i.shardKey(o)) {
			received.WithLabelValues(i.share.group, i.resource, via, "dropped").Inc()
			outside = true
			continue
		}
		received.WithLabelValues(i.share.group, i.resource, via, "kept").Inc()
		i.markListed(o) // before SetList, which copies a typed list's items
		keptObjects = append(keptObjects, item)
		kept = append(kept, o)
	}
	if outside && unstructuredList && i.selects(state) {
		i.share.ignored(i.resource, via+" of objects outside the selector") // once per list, as for typed ones
	}
	if err := meta.SetList(obj, keptObjects); err != nil {
		return nil, fmt.Errorf("filtering the %s list: %w", i.resource, err)
	}
	return kept, nil
}

// markListed puts the share's listed annotation (Options.ListedAnnotation) on o, an object about to
// reach the store from a list. o is the decoded answer's own, not yet shared.
func (i *informer) markListed(o metav1.Object) {
	if i.share.listedAnnotation == "" {
		return
	}
	annotations := make(map[string]string, len(o.GetAnnotations())+1)
	maps.Copy(annotations, o.GetAnnotations())
	annotations[i.share.listedAnnotation] = "true"
	o.SetAnnotations(annotations)
}

// listShardSelector is the selector the server says it applied to a list; "" when it says none.
func listShardSelector(obj runtime.Object) string {
	if u, ok := obj.(*unstructured.UnstructuredList); ok {
		s, _, _ := unstructured.NestedString(u.Object, "metadata", "shardInfo", "selector")
		return s
	}
	if l, ok := obj.(metav1.ShardedListInterface); ok && l.GetShardInfo() != nil {
		return l.GetShardInfo().Selector
	}
	return ""
}

func listContinue(obj runtime.Object) string {
	l, err := meta.ListAccessor(obj)
	if err != nil {
		return ""
	}
	return l.GetContinue()
}

// storeKey is an object's key in an informer's store.
func storeKey(o metav1.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// watch is the reflector's Watch. A watch-list (initial events) selects the current share and the
// store holds it once the initial events end; a watch that resumes selects the share the store
// holds. Either way the stream then follows every change of the share (stream.reselect).
func (i *informer) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	current, _ := i.share.state()
	i.mu.Lock()
	state, torn := i.held, i.torn
	if initial || state == nil {
		state = current
	}
	i.mu.Unlock()
	if torn && !initial {
		return nil, apierrors.NewResourceExpired("the last change of the cache's share did not reach its store")
	}
	w, err := i.inner.WatchWithContext(ctx, i.withSelector(opts, state))
	if err != nil {
		return nil, err
	}
	i.mu.Lock()
	if initial {
		i.held, i.initial, i.torn = state, true, false
		i.forwarded, i.pending = map[string]string{}, map[string]struct{}{}
	} else if i.held == nil {
		i.held = state
	}
	i.mu.Unlock()
	return newStream(ctx, i, w, state, opts), nil
}

// count exports the number of objects the store was given, added to those of the kind's other
// informers (a dependent's cache per name); call it with mu held.
func (i *informer) count() {
	cachedObjects.WithLabelValues(i.share.group, i.resource).Add(float64(len(i.forwarded) - i.counted))
	i.counted = len(i.forwarded)
}

// warm reports whether the store holds partition p: the share it holds has p, no initial events are
// outstanding, and every object of a newly held partition the stream gave is in the store.
func (i *informer) warm(p int) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.held == nil || i.initial || p < 0 || p >= len(i.held.held) || !i.held.held[p] {
		return false
	}
	for key := range i.pending {
		if i.store == nil {
			return false
		}
		if _, exists, _ := i.store.GetByKey(key); !exists {
			return false
		}
		delete(i.pending, key)
	}
	return true
}

// tombstone is the object of a delete for the store key: the store's copy, so that a handler reads
// what it held (the weeder forgets a service by its label), else an empty object of the kind.
func (i *informer) tombstone(key, resourceVersion string) runtime.Object {
	if i.store != nil {
		if obj, exists, _ := i.store.GetByKey(key); exists {
			if o, ok := obj.(runtime.Object); ok {
				return o
			}
		}
	}
	return i.object(key, resourceVersion)
}

// object returns an empty object of the kind with the given key and resource version.
func (i *informer) object(key, resourceVersion string) runtime.Object {
	o := i.newObject()
	m, err := meta.Accessor(o)
	if err != nil {
		return o
	}
	ns, name, _ := toolscache.SplitMetaNamespaceKey(key)
	m.SetNamespace(ns)
	m.SetName(name)
	m.SetResourceVersion(resourceVersion)
	return o
}

// groupResource names a kind in logs and metrics.
func groupResource(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind
	}
	return gvk.Kind + "." + gvk.Group
}
