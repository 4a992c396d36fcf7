package shardcache_test

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/shardcache"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

// seed runs kube-apiserver with shard selectors (feature gate ShardedListAndWatch), seedWithout
// without: it ignores them.
var seed, seedWithout *test.Environment

func TestMain(m *testing.M) {
	os.Exit(test.MainWith(m, test.EnvOf{Env: &seed},
		test.EnvOf{Env: &seedWithout, Options: test.StartOptions{WithoutShardSelectors: true}}))
}

var clusterGVK = schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"}

const (
	secretName = "shardcache-kubeconfig"
	partitions = 8
)

// shoots are the namespaces of a test, each with a Secret and a Cluster named after it.
type shoots struct {
	env   *test.Environment
	names []string
}

func newShoots(t *testing.T, env *test.Environment, names []string) *shoots {
	s := &shoots{env: env}
	for _, ns := range names {
		s.add(t, ns)
	}
	return s
}

func (s *shoots) add(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	require.NoError(t, s.env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}}))
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(clusterGVK)
	cluster.SetName(ns)
	cluster.Object["spec"] = map[string]any{
		"cloudProfile": map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile"},
		"seed":         map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Seed"},
		"shoot":        map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot"},
	}
	require.NoError(t, s.env.Client.Create(ctx, cluster))
	t.Cleanup(func() {
		_ = s.env.Client.Delete(context.Background(), cluster)
		_ = s.env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	s.names = append(s.names, ns)
}

// in returns the namespaces of the shoots in the partitions held marks.
func (s *shoots) in(held []bool) []string {
	var out []string
	for _, ns := range s.names {
		if held[sharding.Partitions{Count: partitions}.Of(ns)] {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// cached returns the namespaces of the test's shoots whose Secret, and whose Cluster, the cache holds.
func (s *shoots) cached(t assert.TestingT, c cache.Cache) (secrets, clusters []string) {
	ctx := context.Background()
	var list corev1.SecretList
	assert.NoError(t, c.List(ctx, &list))
	for _, item := range list.Items {
		if slices.Contains(s.names, item.Namespace) {
			secrets = append(secrets, item.Namespace)
		}
	}
	ul := &unstructured.UnstructuredList{}
	ul.SetGroupVersionKind(clusterGVK.GroupVersion().WithKind("ClusterList"))
	assert.NoError(t, c.List(ctx, ul))
	for _, item := range ul.Items {
		if slices.Contains(s.names, item.GetName()) {
			clusters = append(clusters, item.GetName())
		}
	}
	slices.Sort(secrets)
	slices.Sort(clusters)
	return secrets, clusters
}

func mask(pred func(p int) bool) []bool {
	held := make([]bool, partitions)
	for p := range held {
		held[p] = pred(p)
	}
	return held
}

// startCache starts a cache of Secrets and Clusters that holds share, and waits for its sync.
func startCache(t *testing.T, env *test.Environment, share *shardcache.Share) cache.Cache {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	newInformer := shardcache.NewInformer(scheme, map[schema.GroupKind]shardcache.Kind{
		{Kind: "Secret"}:       {Share: share},
		clusterGVK.GroupKind(): {Share: share, ClusterScoped: true},
	})
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(clusterGVK)
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme, NewInformer: newInformer, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", secretName)},
		cluster:          {},
	}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, obj := range []client.Object{&corev1.Secret{}, cluster} {
		_, err := c.GetInformer(ctx, obj)
		require.NoError(t, err)
	}
	go func() { _ = c.Start(ctx) }()
	require.True(t, c.WaitForCacheSync(ctx))
	return c
}

// awaitWarm waits until the share holds every partition held marks.
func awaitWarm(t *testing.T, share *shardcache.Share, held []bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		for p, h := range held {
			if h && !share.Warm(p) {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond)
}

func TestACacheHoldsItsShareAndChangesItWithinItsWatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     **test.Environment
		server  bool
		ignored bool
	}{
		{"selected by the API server", &seed, true, false},
		{"the API server ignores the selector: filtered", &seedWithout, true, true},
		{"filtered by the replica", &seed, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := *tc.env
			env.Require(t)
			group := "g" + strings.ReplaceAll(strings.ToLower(t.Name()[len(t.Name())-12:]), " ", "-")
			r := rand.New(rand.NewPCG(uint64(len(tc.name)), 2))
			s := newShoots(t, env, shootNames(r, 32))
			share := shardcache.NewShare(shardcache.Options{Partitions: sharding.Partitions{Count: partitions}, Server: tc.server, Group: group})
			even := mask(func(p int) bool { return p%2 == 0 })
			share.Hold(even)
			c := startCache(t, env, share)

			awaitWarm(t, share, even)
			secrets, clusters := s.cached(t, c)
			assert.Equal(t, s.in(even), secrets, "the Secrets of the share only")
			assert.Equal(t, s.in(even), clusters, "the Clusters of the share only")
			assert.False(t, share.Warm(1), "a partition outside the share is not held")

			// A new share: partitions 0, 1 and 4 (0 and 4 stay, 1 comes, 2 and 6 go).
			next := mask(func(p int) bool { return p == 0 || p == 1 || p == 4 })
			share.Hold(next)
			awaitWarm(t, share, next)
			secrets, clusters = s.cached(t, c)
			for _, ns := range s.in(next) {
				assert.Contains(t, secrets, ns, "warm: every Secret of the new share is there")
				assert.Contains(t, clusters, ns, "warm: every Cluster of the new share is there")
			}
			assert.EventuallyWithT(t, func(t *assert.CollectT) {
				secrets, clusters := s.cached(t, c)
				assert.Equal(t, s.in(next), secrets)
				assert.Equal(t, s.in(next), clusters)
			}, 10*time.Second, 10*time.Millisecond, "what left the share is dropped")
			assert.Positive(t, metricstest.Sum(t, "dwd_cache_reselects_total", map[string]string{"group": group, "resource": "Secret"}),
				"the share changed within the watch, without a relist")

			// The watch goes on with the new share: a shoot that comes in it is seen, one outside is not.
			var inside, outside string
			for _, ns := range shootNames(r, 64) {
				if p := (sharding.Partitions{Count: partitions}).Of(ns); next[p] && inside == "" {
					inside = ns
				} else if !next[p] && outside == "" {
					outside = ns
				}
			}
			s.add(t, outside)
			s.add(t, inside)
			assert.EventuallyWithT(t, func(t *assert.CollectT) {
				secrets, clusters := s.cached(t, c)
				assert.Equal(t, s.in(next), secrets)
				assert.Equal(t, s.in(next), clusters)
			}, 10*time.Second, 10*time.Millisecond, "a new shoot of the share is cached, one outside is not")

			ignored := metricstest.Sum(t, "dwd_cache_shard_selector_ignored_total", map[string]string{"group": group, "resource": "Secret"})
			dropped := metricstest.Sum(t, "dwd_cache_objects_received_total", map[string]string{"group": group, "resource": "Secret", "result": "dropped"})
			if tc.ignored {
				assert.Positive(t, ignored, "an API server that ignores the selector is noticed")
			} else {
				assert.Zero(t, ignored)
			}
			if tc.server && !tc.ignored {
				assert.Zero(t, dropped, "the API server sends the share only")
			} else {
				assert.Positive(t, dropped, "the replica filters")
			}
			assert.Positive(t, metricstest.Sum(t, "dwd_cache_objects_received_total", map[string]string{"group": group, "resource": "Cluster.extensions.gardener.cloud", "result": "dropped"}),
				"Clusters are filtered by name, on the replica")
		})
	}
}
