package scaler_test

import (
	"context"
	"maps"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// requestCounter counts the requests sent through a transport, by method and the last path element
// (the resource's name), e.g. "PATCH kube-controller-manager".
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.counts[r.Method+" "+path.Base(r.URL.Path)]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// take returns the counts so far and starts counting afresh.
func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := c.counts
	c.counts = map[string]int{}
	return counts
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tokenCounter is a Budget that grants every request at once and counts the tokens taken.
type tokenCounter struct{ n atomic.Int32 }

func (c *tokenCounter) Reserve(_ time.Time, _ scaler.Direction, n int) (time.Duration, func(time.Time)) {
	c.n.Add(int32(n))
	return 0, nil
}

// staleCache is a cache that serves an old copy of one object, as an informer that has not yet seen
// the latest write (or the deletion) would: on the first read of it, or on every read when always is set.
type staleCache struct {
	client.Reader
	mu     sync.Mutex
	old    *appsv1.Deployment // nil once it has been served, unless always
	always bool
}

func (s *staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	s.mu.Lock()
	old := s.old
	if old != nil && old.Name == key.Name && !s.always {
		s.old = nil
	}
	s.mu.Unlock()
	if d, ok := obj.(*appsv1.Deployment); ok && old != nil && old.Name == key.Name {
		old.DeepCopyInto(d)
		return nil
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

// TestRequestsPerResource counts the requests that reach the API server when the Scaler reads through
// an informer cache, as in the prober.
func TestRequestsPerResource(t *testing.T) {
	running := map[string]state{kcm: {replicas: 1}, mcm: {replicas: 2}, ca: {replicas: 3}}
	stopped := map[string]state{kcm: {annotations: marks("1")}, mcm: {annotations: marks("2")}, ca: {annotations: marks("3")}}
	onePatchEach := map[string]int{"PATCH " + kcm: 1, "PATCH " + mcm: 1, "PATCH " + ca: 1}
	tests := []struct {
		name    string
		dir     scaler.Direction
		start   map[string]state
		stale   bool // the cache serves kube-controller-manager once as it was before another write
		deleted bool // cluster-autoscaler (optional) is deleted, but the cache keeps serving it
		want    map[string]int
	}{
		{name: "down, current cache", dir: scaler.Down, start: running, want: onePatchEach},
		{name: "up, current cache", dir: scaler.Up, start: stopped, want: onePatchEach},
		{name: "down, stale cache: a conflict, a live read, a patch", dir: scaler.Down, start: running, stale: true,
			want: map[string]int{"PATCH " + kcm: 2, "GET " + kcm: 1, "PATCH " + mcm: 1, "PATCH " + ca: 1}},
		{name: "up, stale cache: a conflict, a live read, a patch", dir: scaler.Up, start: stopped, stale: true,
			want: map[string]int{"PATCH " + kcm: 2, "GET " + kcm: 1, "PATCH " + mcm: 1, "PATCH " + ca: 1}},
		{name: "down, an optional resource deleted behind the cache: a failed patch, a live read, skipped", dir: scaler.Down,
			start: running, deleted: true,
			want: map[string]int{"PATCH " + kcm: 1, "PATCH " + mcm: 1, "PATCH " + ca: 1, "GET " + ca: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, withTimings(upstreamInfos(t), 0, 10*time.Second))
			for name, s := range tt.start {
				f.create(t, name, s.replicas, s.annotations)
			}
			informers := startCache(t, f)
			var reader client.Reader = informers
			if tt.stale {
				old := &appsv1.Deployment{}
				require.NoError(t, informers.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: kcm}, old))
				d := f.get(t, kcm)
				d.Labels = map[string]string{"changed-by": "another-writer"}
				require.NoError(t, env.Client.Update(context.Background(), d))
				reader = &staleCache{Reader: informers, old: old}
			}
			if tt.deleted {
				old := &appsv1.Deployment{}
				require.NoError(t, informers.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: ca}, old))
				require.NoError(t, env.Client.Delete(context.Background(), old.DeepCopy()))
				reader = &staleCache{Reader: informers, old: old, always: true}
			}
			requests := f.countRequests(t, reader)
			tokens := &tokenCounter{}
			f.scaler.Limiter = tokens

			require.NoError(t, f.scaler.Scale(context.Background(), f.ns, tt.dir, meltdown))

			got := requests.take()
			assert.Equal(t, tt.want, got)
			sent := 0
			for n := range maps.Values(got) {
				sent += n
			}
			if tt.deleted {
				// The live read after a NotFound takes the write's token with its own, unused here.
				sent++
			}
			assert.Equal(t, int32(sent), tokens.n.Load(), "every request, and only requests, took a token")
		})
	}
}

// startCache starts an informer cache of the Deployments in f's namespace and waits until it holds the
// current version of each.
func startCache(t *testing.T, f *fixture) cache.Cache {
	t.Helper()
	informers, err := cache.New(env.Config, cache.Options{Scheme: env.Client.Scheme(),
		DefaultNamespaces: map[string]cache.Config{f.ns: {}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- informers.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-started) })
	_, err = informers.GetInformer(ctx, &appsv1.Deployment{})
	require.NoError(t, err)
	require.True(t, informers.WaitForCacheSync(ctx))
	live := &appsv1.DeploymentList{}
	require.NoError(t, env.Client.List(ctx, live, client.InNamespace(f.ns)))
	require.Eventually(t, func() bool {
		for _, d := range live.Items {
			cached := &appsv1.Deployment{}
			if informers.Get(ctx, client.ObjectKeyFromObject(&d), cached) != nil || cached.ResourceVersion != d.ResourceVersion {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	return informers
}

// countRequests gives f's Scaler a Client that reads through reader and writes to the API server, and
// an APIReader; the requests of both are counted. Readiness is faked (see journal.ready), since no
// controller runs.
func (f *fixture) countRequests(t *testing.T, reader client.Reader) *requestCounter {
	t.Helper()
	counter := &requestCounter{counts: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.wrap)
	// The mapper of env.Client has discovered apps/v1 already: its discovery requests are not the scaler's.
	opts := client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()}
	live, err := client.NewWithWatch(cfg, opts)
	require.NoError(t, err)
	opts.Cache = &client.CacheOptions{Reader: reader}
	cached, err := client.NewWithWatch(cfg, opts)
	require.NoError(t, err)
	f.journal.ready = true
	f.scaler.Client = interceptor.NewClient(cached, f.journal.funcs())
	f.scaler.APIReader = live
	return counter
}
