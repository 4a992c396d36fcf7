package shardcache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// fakeServer answers lists with objects and gives each watch a fake watcher.
type fakeServer struct {
	objects []corev1.Secret
	watches chan *watch.FakeWatcher
	lists   []metav1.ListOptions
}

func (f *fakeServer) listWatch() toolscache.ListerWatcher {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			f.lists = append(f.lists, opts)
			return &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: append([]corev1.Secret(nil), f.objects...)}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFake()
			f.watches <- w
			return w, nil
		},
	}
}

func receive(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		require.True(t, ok, "the stream ended")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return watch.Event{}
}

// A stream that merged the watch of a new partition ends with an expired error when either watch
// ends, so that the reflector lists the share again instead of resuming from a resource version only
// one of them had reached.
func TestAMergedStreamEndsExpiredWhenOneOfItsWatchesEnds(t *testing.T) {
	const count = rcount
	a, b := rnamespaces(0, 1)[0], rnamespaces(1, 1)[0]
	server := &fakeServer{watches: make(chan *watch.FakeWatcher, 4), objects: []corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "s", ResourceVersion: "9"}},
	}}
	share := NewShare(Options{Partitions: sharding.Partitions{Count: count}, Server: true, Group: "merged"})
	share.Hold([]bool{true, false, false, false})
	i := newInformer(share, server.listWatch(), &corev1.Secret{}, "Secret")
	_, err := i.list(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	stream, err := i.watch(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
	require.NoError(t, err)
	defer stream.Stop()
	first := <-server.watches

	share.Hold([]bool{true, true, false, false})
	added := receive(t, stream)
	assert.Equal(t, watch.Added, added.Type)
	assert.Equal(t, b, added.Object.(*corev1.Secret).Namespace, "the object of the partition that came")
	require.Len(t, server.lists, 2)
	assert.Contains(t, server.lists[1].ShardSelector, "shardRange(", "the new partition is listed with its own selector")
	second := <-server.watches

	second.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "t", ResourceVersion: "11"}})
	assert.Equal(t, watch.Added, receive(t, stream).Type, "events of both watches pass")
	first.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "u", ResourceVersion: "12"}})
	assert.Equal(t, watch.Added, receive(t, stream).Type)

	first.Stop()
	ev := receive(t, stream)
	require.Equal(t, watch.Error, ev.Type)
	assert.True(t, apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)), "%v", ev.Object)
	_, open := <-stream.ResultChan()
	assert.False(t, open)
}
