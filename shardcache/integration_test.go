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

var machineGVK = schema.GroupVersionKind{Group: "machine.sapcloud.io", Version: "v1alpha1", Kind: "Machine"}

const (
	secretName = "shardcache-kubeconfig"
	partitions = 8
)

// shoots are the namespaces of a test, each with a Secret and a Machine (an unstructured kind).
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
	machine := &unstructured.Unstructured{}
	machine.SetGroupVersionKind(machineGVK)
	machine.SetNamespace(ns)
	machine.SetName("machine-0")
	machine.Object["spec"] = map[string]any{"class": map[string]any{"kind": "MachineClass", "name": "any"}}
	require.NoError(t, s.env.Client.Create(ctx, machine))
	t.Cleanup(func() {
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

// cached returns the namespaces of the test's shoots whose Secret, and whose Machine, the cache holds.
func (s *shoots) cached(t assert.TestingT, c cache.Cache) (secrets, machines []string) {
	ctx := context.Background()
	var list corev1.SecretList
	assert.NoError(t, c.List(ctx, &list))
	for _, item := range list.Items {
		if slices.Contains(s.names, item.Namespace) {
			secrets = append(secrets, item.Namespace)
		}
	}
	ul := &unstructured.UnstructuredList{}
	ul.SetGroupVersionKind(machineGVK.GroupVersion().WithKind("MachineList"))
	assert.NoError(t, c.List(ctx, ul))
	for _, item := range ul.Items {
		if slices.Contains(s.names, item.GetNamespace()) {
			machines = append(machines, item.GetNamespace())
		}
	}
	slices.Sort(secrets)
	slices.Sort(machines)
	return secrets, machines
}

func mask(pred func(p int) bool) []bool {
	held := make([]bool, partitions)
	for p := range held {
		held[p] = pred(p)
	}
	return held
}

// startCache starts a cache of Secrets and Machines that holds share, and waits for its sync.
func startCache(t *testing.T, env *test.Environment, share *shardcache.Share) cache.Cache {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	newInformer := shardcache.NewInformer(scheme, map[schema.GroupKind]*shardcache.Share{
		{Kind: "Secret"}:       share,
		machineGVK.GroupKind(): share,
	})
	machine := &unstructured.Unstructured{}
	machine.SetGroupVersionKind(machineGVK)
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme, NewInformer: newInformer, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", secretName)},
		machine:          {},
	}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, obj := range []client.Object{&corev1.Secret{}, machine} {
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
			secrets, machines := s.cached(t, c)
			assert.Equal(t, s.in(even), secrets, "the Secrets of the share only")
			assert.Equal(t, s.in(even), machines, "the Machines of the share only")
			assert.False(t, share.Warm(1), "a partition outside the share is not held")

			// A new share: partitions 0, 1 and 4 (0 and 4 stay, 1 comes, 2 and 6 go).
			next := mask(func(p int) bool { return p == 0 || p == 1 || p == 4 })
			share.Hold(next)
			awaitWarm(t, share, next)
			secrets, machines = s.cached(t, c)
			for _, ns := range s.in(next) {
				assert.Contains(t, secrets, ns, "warm: every Secret of the new share is there")
				assert.Contains(t, machines, ns, "warm: every Machine of the new share is there")
			}
			assert.EventuallyWithT(t, func(t *assert.CollectT) {
				secrets, machines := s.cached(t, c)
				assert.Equal(t, s.in(next), secrets)
				assert.Equal(t, s.in(next), machines)
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
				secrets, machines := s.cached(t, c)
				assert.Equal(t, s.in(next), secrets)
				assert.Equal(t, s.in(next), machines)
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
			machineLabels := map[string]string{"group": group, "resource": "Machine.machine.sapcloud.io"}
			machinesDropped := metricstest.Sum(t, "dwd_cache_objects_received_total", map[string]string{"group": group, "resource": machineLabels["resource"], "result": "dropped"})
			assert.Equal(t, dropped > 0, machinesDropped > 0, "an unstructured kind is selected as a typed one")
			// The server cannot echo the selector on a custom resource's list: only what it sends tells.
			assert.Equal(t, tc.ignored, metricstest.Sum(t, "dwd_cache_shard_selector_ignored_total", machineLabels) > 0,
				"an unstructured kind's selector is judged ignored exactly when the server ignores it")
		})
	}
}
