package shardcache

// A small API server of Secrets that honours shard selectors, and informers built by NewInformer on
// it: the stream's rules in client-go's real reflector and shared informer.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

const rcount = 4

var rparts = sharding.Partitions{Count: rcount}

// rmasks maps every selector a share of rcount partitions writes to its mask.
var rmasks = func() map[string][]bool {
	m := map[string][]bool{}
	for bits := 0; bits < 1<<rcount; bits++ {
		mask := make([]bool, rcount)
		for p := range mask {
			mask[p] = bits&(1<<p) != 0
		}
		m[selectorOf(rparts, mask)] = mask
	}
	return m
}()

func rselects(sel, ns string) bool {
	if sel == "" {
		return true
	}
	return rmasks[sel][rparts.Of(ns)]
}

type rwatcher struct {
	w   *watch.RaceFreeFakeWatcher
	sel string
}

// fakeAPI is a tiny API server for Secrets that honours shard selectors: list, watch (watch-list too),
// no history.
type fakeAPI struct {
	mu       sync.Mutex
	rv       int
	objs     map[string]*corev1.Secret
	watchers []rwatcher
	lists    atomic.Int32
	watches  atomic.Int32
	// listed are the options of every list, in order.
	listed []metav1.ListOptions
}

func newFakeAPI() *fakeAPI { return &fakeAPI{objs: map[string]*corev1.Secret{}} }

func (f *fakeAPI) put(ns, name string, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, ResourceVersion: strconv.Itoa(f.rv)}}
	_, existed := f.objs[ns+"/"+name]
	f.objs[ns+"/"+name] = s
	for _, w := range f.watchers {
		if w.w.IsStopped() || !rselects(w.sel, ns) {
			continue
		}
		if existed {
			w.w.Modify(s.DeepCopy())
		} else {
			w.w.Add(s.DeepCopy())
		}
	}
}

func (f *fakeAPI) del(ns, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	s := f.objs[ns+"/"+name].DeepCopy()
	s.ResourceVersion = strconv.Itoa(f.rv)
	delete(f.objs, ns+"/"+name)
	for _, w := range f.watchers {
		if !w.w.IsStopped() && rselects(w.sel, ns) {
			w.w.Delete(s.DeepCopy())
		}
	}
}

func (f *fakeAPI) open() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.watchers {
		if !w.w.IsStopped() {
			n++
		}
	}
	return n
}

func (f *fakeAPI) first() *watch.RaceFreeFakeWatcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watchers {
		if !w.w.IsStopped() {
			return w.w
		}
	}
	return nil
}

func (f *fakeAPI) lw() *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			f.lists.Add(1)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.listed = append(f.listed, opts)
			l := &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(f.rv)}}
			if opts.ShardSelector != "" {
				l.ShardInfo = &metav1.ShardInfo{Selector: opts.ShardSelector}
			}
			for _, s := range f.objs {
				if rselects(opts.ShardSelector, s.Namespace) {
					l.Items = append(l.Items, *s.DeepCopy())
				}
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			f.watches.Add(1)
			f.mu.Lock()
			defer f.mu.Unlock()
			w := watch.NewRaceFreeFake()
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				for _, s := range f.objs {
					if rselects(opts.ShardSelector, s.Namespace) {
						w.Add(s.DeepCopy())
					}
				}
				w.Action(watch.Bookmark, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(f.rv),
					Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
			}
			f.watchers = append(f.watchers, rwatcher{w: w, sel: opts.ShardSelector})
			return w, nil
		},
	}
}

func rnamespaces(p, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		ns := fmt.Sprintf("shoot--p--s%d", i)
		if rparts.Of(ns) == p {
			out = append(out, ns)
		}
	}
	return out
}

func ronly(ps ...int) []bool {
	m := make([]bool, rcount)
	for _, p := range ps {
		m[p] = true
	}
	return m
}

type rharness struct {
	share    *Share
	api      *fakeAPI
	informer toolscache.SharedIndexInformer
}

func rstart(t *testing.T, api *fakeAPI, share *Share, handler toolscache.ResourceEventHandler, transform toolscache.TransformFunc) *rharness {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	newInf := NewInformer(scheme, map[schema.GroupKind]*Share{{Kind: "Secret"}: share})
	inf := newInf(api.lw(), &corev1.Secret{}, 0, toolscache.Indexers{})
	if handler != nil {
		if _, err := inf.AddEventHandler(handler); err != nil {
			t.Fatal(err)
		}
	}
	if transform != nil {
		if err := inf.SetTransform(transform); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	return &rharness{share: share, api: api, informer: inf}
}

func (h *rharness) keys() []string {
	k := h.informer.GetIndexer().ListKeys()
	slices.Sort(k)
	return k
}

func (h *rharness) want(held []bool) []string {
	var out []string
	h.api.mu.Lock()
	defer h.api.mu.Unlock()
	for k, s := range h.api.objs {
		if held[rparts.Of(s.Namespace)] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func seedAPI(perPartition int, labels map[string]string) *fakeAPI {
	api := newFakeAPI()
	for p := range rcount {
		for _, ns := range rnamespaces(p, perPartition) {
			api.put(ns, "s", labels)
		}
	}
	return api
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, msg)
}

// The delete of an object that leaves the share carries the object the store held: a handler reads
// what it needs of it (the weeder forgets a service by its label).
func TestDeletesOfObjectsThatLeaveCarryTheStoredObject(t *testing.T) {
	api := seedAPI(2, map[string]string{"kubernetes.io/service-name": "kube-apiserver"})
	share := NewShare(Options{Partitions: rparts, Server: true, Group: "t1"})
	share.Hold(ronly(0, 1, 2, 3))
	var mu sync.Mutex
	var deleted []map[string]string
	h := rstart(t, api, share, toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		deleted = append(deleted, obj.(*corev1.Secret).Labels)
	}}, nil)
	eventually(t, func() bool { return share.Warm(0) && share.Warm(3) }, "warm")
	share.Hold(ronly(0))
	eventually(t, func() bool { return slices.Equal(h.keys(), h.want(ronly(0))) }, "the share shrank")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, deleted, 6)
	for _, l := range deleted {
		assert.Equal(t, "kube-apiserver", l["kubernetes.io/service-name"])
	}
}

// After the stream passed a server error on, it changes nothing: the reflector watches again
// (without a list, for a 429) and that watch changes to the new share.
func TestAfterAnErrorTheStreamChangesNothing(t *testing.T) {
	api := seedAPI(2, nil)
	share := NewShare(Options{Partitions: rparts, Server: true, Group: "t2"})
	share.Hold(ronly(0))
	blocked, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	h := rstart(t, api, share, nil, func(obj any) (any, error) {
		if s, ok := obj.(*corev1.Secret); ok && s.Name == "slow" && armed.CompareAndSwap(true, false) {
			close(blocked)
			<-release // the reflector is busy while the error and the change of share arrive
		}
		return obj, nil
	})
	eventually(t, func() bool { return share.Warm(0) }, "warm")
	armed.Store(true)
	api.put(rnamespaces(0, 1)[0], "slow", nil)
	<-blocked
	status := apierrors.NewTooManyRequests("slow down", 1).ErrStatus
	api.first().Error(&status)
	share.Hold(ronly(0, 1))
	close(release)
	eventually(t, func() bool { return share.Warm(1) }, "the partition that came is held")
	assert.Equal(t, h.want(ronly(0, 1)), h.keys())
}

// A change of share that only drops partitions leaves the reflector's resume point where the watch
// was, not at the deletes' older versions.
func TestADropOnlyChangeKeepsTheResumePoint(t *testing.T) {
	api := seedAPI(2, nil)
	share := NewShare(Options{Partitions: rparts, Server: true, Group: "t3"})
	share.Hold(ronly(0, 1))
	h := rstart(t, api, share, nil, nil)
	eventually(t, func() bool { return share.Warm(0) && share.Warm(1) }, "warm")
	api.put(rnamespaces(0, 1)[0], "late", nil)
	eventually(t, func() bool { return slices.Contains(h.keys(), rnamespaces(0, 1)[0]+"/late") }, "the late object")
	before := mustAtoi(h.informer.LastSyncResourceVersion())
	share.Hold(ronly(0))
	eventually(t, func() bool { return slices.Equal(h.keys(), h.want(ronly(0))) }, "the share shrank")
	eventually(t, func() bool { return mustAtoi(h.informer.LastSyncResourceVersion()) >= before }, "the resume point did not go back")
}

func mustAtoi(s string) int { n, _ := strconv.Atoi(s); return n }

func TestWarmIsFalseWithoutInformers(t *testing.T) {
	share := NewShare(Options{Partitions: rparts, Group: "t4"})
	share.Hold(ronly(1))
	assert.False(t, share.Warm(1), "nothing holds it")
}

// A filtering cache (each watch receives the whole kind) never keeps more than maxSources watches.
func TestAFilteringCacheKeepsFewWatches(t *testing.T) {
	api := seedAPI(1, nil)
	share := NewShare(Options{Partitions: rparts, Server: false, Group: "t5"})
	share.Hold(ronly(0))
	h := rstart(t, api, share, nil, nil)
	for _, m := range [][]bool{ronly(0, 1), ronly(0), ronly(0, 1), ronly(0), ronly(0, 1), ronly(0, 2), ronly(0, 1, 3)} {
		share.Hold(m)
		eventually(t, func() bool { return slices.Equal(h.keys(), h.want(m)) }, "the share changed")
		assert.LessOrEqual(t, api.open(), maxSources)
	}
}

// A partition that leaves and comes back within one stream is watched once: one delete, one call.
func TestAPartitionThatComesBackIsWatchedOnce(t *testing.T) {
	api := seedAPI(1, nil)
	share := NewShare(Options{Partitions: rparts, Server: true, Group: "t6"})
	share.Hold(ronly(0))
	var deletes atomic.Int32
	h := rstart(t, api, share, toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(any) { deletes.Add(1) }}, nil)
	for _, m := range [][]bool{ronly(0, 1), ronly(0), ronly(0, 1)} {
		share.Hold(m)
		eventually(t, func() bool { return share.Warm(0) && slices.Equal(h.keys(), h.want(m)) }, "the share changed")
	}
	deletes.Store(0)
	api.del(rnamespaces(1, 1)[0], "s")
	eventually(t, func() bool { return deletes.Load() == 1 }, "the delete")
	assert.Never(t, func() bool { return deletes.Load() > 1 }, 300*time.Millisecond, 10*time.Millisecond, "one delete, one call")
}

// A share that shrinks is watched narrower: the server stops sending the partitions that left.
func TestAShrunkShareIsWatchedNarrower(t *testing.T) {
	api := seedAPI(2, nil)
	share := NewShare(Options{Partitions: rparts, Server: true, Group: "t7"})
	share.Hold(ronly(0, 1))
	h := rstart(t, api, share, nil, nil)
	eventually(t, func() bool { return share.Warm(0) && share.Warm(1) }, "warm")
	share.Hold(ronly(0))
	eventually(t, func() bool { return slices.Equal(h.keys(), h.want(ronly(0))) }, "the share shrank")
	eventually(t, func() bool { return slices.Equal(api.selectors(), []string{selectorOf(rparts, ronly(0))}) }, "one watch, of the share")
	dropped := testutil.ToFloat64(received.WithLabelValues("t7", "Secret", "watch", "dropped"))
	api.put(rnamespaces(1, 1)[0], "left", nil)
	api.put(rnamespaces(0, 1)[0], "kept", nil)
	eventually(t, func() bool { return slices.Contains(h.keys(), rnamespaces(0, 1)[0]+"/kept") }, "an event of the share")
	assert.Equal(t, dropped, testutil.ToFloat64(received.WithLabelValues("t7", "Secret", "watch", "dropped")), "nothing of the partition that left arrives")
}

// The list of the partitions that came asks for a state not older than the stream's, which the API
// server's watch cache answers at once, not for a consistent read, which waits for the cache to reach
// etcd's revision (and under load lists from etcd, where no selector applies).
func TestTheListOfPartitionsThatCameIsNotOlderThanTheStream(t *testing.T) {
	api := seedAPI(1, nil)
	share := NewShare(Options{Partitions: rparts, Server: true, Group: "t10"})
	share.Hold(ronly(0))
	h := rstart(t, api, share, nil, nil)
	eventually(t, func() bool { return share.Warm(0) }, "warm")
	api.put(rnamespaces(0, 1)[0], "later", nil)
	eventually(t, func() bool { return slices.Contains(h.keys(), rnamespaces(0, 1)[0]+"/later") }, "the stream's last event")
	api.mu.Lock()
	streamRV := strconv.Itoa(api.rv)
	before := len(api.listed)
	api.mu.Unlock()
	share.Hold(ronly(0, 1))
	eventually(t, func() bool { return share.Warm(1) }, "the partition that came")
	api.mu.Lock()
	defer api.mu.Unlock()
	require.Len(t, api.listed, before+1, "one list, of the partition that came")
	reselect := api.listed[before]
	assert.Equal(t, selectorOf(rparts, ronly(1)), reselect.ShardSelector)
	assert.Equal(t, metav1.ResourceVersionMatchNotOlderThan, reselect.ResourceVersionMatch)
	assert.Equal(t, streamRV, reselect.ResourceVersion)
}

// selectors are the shard selectors of the open watches.
func (f *fakeAPI) selectors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, w := range f.watchers {
		if !w.w.IsStopped() {
			out = append(out, w.sel)
		}
	}
	return out
}

// A filtering cache that started with an empty share keeps one watch once it holds partitions: the
// watch of the empty share, which receives the whole kind, ends.
func TestTheWatchOfAnEmptyShareEnds(t *testing.T) {
	api := seedAPI(1, nil)
	share := NewShare(Options{Partitions: rparts, Server: false, Group: "t8"})
	h := rstart(t, api, share, nil, nil)
	share.Hold(ronly(0, 1, 2, 3))
	eventually(t, func() bool { return slices.Equal(h.keys(), h.want(ronly(0, 1, 2, 3))) }, "the share")
	eventually(t, func() bool { return api.open() == 1 }, "one watch")
}

// A filtering cache drops the watch events of the shoots outside its share.
func TestAFilteringCacheDropsEventsOutsideItsShare(t *testing.T) {
	api := seedAPI(1, nil)
	share := NewShare(Options{Partitions: rparts, Server: false, Group: "t9"})
	share.Hold(ronly(0))
	h := rstart(t, api, share, nil, nil)
	eventually(t, func() bool { return share.Warm(0) }, "warm")
	outside, inside := rnamespaces(1, 1)[0]+"/late", rnamespaces(0, 1)[0]+"/late"
	api.put(rnamespaces(1, 1)[0], "late", nil) // first: the watch delivers in order
	api.put(rnamespaces(0, 1)[0], "late", nil)
	eventually(t, func() bool { return slices.Contains(h.keys(), inside) }, "the event of the share")
	assert.NotContains(t, h.keys(), outside)
	assert.Equal(t, h.want(ronly(0)), h.keys())
}

// With a listed annotation, the objects a list gave the store carry it (the first list, by a
// watch-list's initial events or by a List, and the list of partitions that came), those a watch event
// gave do not; without one, none does.
func TestObjectsFromAListCarryTheListedAnnotation(t *testing.T) {
	for _, watchList := range []bool{true, false} {
		t.Run(fmt.Sprintf("watch-list %t", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			lists := testListedAnnotation(t, fmt.Sprintf("t11-%t", watchList))
			if watchList {
				assert.Zero(t, lists, "the first sync ran by initial events")
			} else {
				assert.Positive(t, lists, "the first sync ran by a List")
			}
		})
	}
}

// testListedAnnotation checks the listed annotation with shares of groups named after group, and
// returns how many Lists the first informer's first sync made.
func testListedAnnotation(t *testing.T, group string) int32 {
	api := seedAPI(1, nil)
	listed := func(h *rharness, key string) (bool, bool) {
		obj, exists, _ := h.informer.GetIndexer().GetByKey(key)
		if !exists {
			return false, false
		}
		return obj.(*corev1.Secret).Annotations["t/listed"] == "true", true
	}
	share := NewShare(Options{Partitions: rparts, Server: true, Group: group, ListedAnnotation: "t/listed"})
	share.Hold(ronly(0))
	h := rstart(t, api, share, nil, nil)
	lists := api.lists.Load()
	first, came := rnamespaces(0, 1)[0]+"/s", rnamespaces(1, 1)[0]+"/s"
	mark, ok := listed(h, first)
	require.True(t, ok)
	assert.True(t, mark, "the first list")
	api.put(rnamespaces(0, 1)[0], "s", map[string]string{"changed": "yes"})
	eventually(t, func() bool { mark, ok := listed(h, first); return ok && !mark }, "a watch event replaces the listed state")
	share.Hold(ronly(0, 1))
	eventually(t, func() bool { mark, ok := listed(h, came); return ok && mark }, "the list of a partition that came")

	plain := NewShare(Options{Partitions: rparts, Server: true, Group: group + "-plain"})
	plain.Hold(ronly(0))
	h = rstart(t, api, plain, nil, nil)
	mark, ok = listed(h, first)
	require.True(t, ok)
	assert.False(t, mark, "no listed annotation asked for")
	return lists
}
