package prober_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/config/configtest"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Setup registers every seed informer a probe reads, so that the manager has them synced before the
// probes start and no probe waits for a first sync (a list that may never succeed) while it holds shoot
// data whose age it measures. A cache that refuses to read a kind it was not told to watch, instead of
// starting an informer on the first read, shows it: the replica's probes still succeed.
func TestSetupRegistersEveryInformerAProbeReads(t *testing.T) {
	seed.Require(t)
	s := newShoot(t, 3)
	cfg := configtest.Prober(t, proberConfig)
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(seed.Config, manager.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: prober.CacheOptions(cfg), ReaderFailOnMissingInformer: true},
	})
	require.NoError(t, err)
	settings := config.DefaultSharding("probers")
	settings.Namespace, settings.MemberName = seed.Namespace(t), "dwd-0"
	leaseClient, err := kubernetes.NewForConfig(sharding.LeaseClientConfig(seed.Config, settings.PartitionCount))
	require.NoError(t, err)
	runner := sharding.NewRunner(sharding.RunnerOptions{Settings: settings, Client: leaseClient})
	require.NoError(t, mgr.Add(runner))
	ctx, cancel := context.WithCancel(context.Background())
	_, err = prober.Setup(ctx, mgr, prober.Options{Config: cfg, Owner: runner.Coordinator(), Workers: 2, QPS: 50, Burst: 100})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	s.awaitSeenRenewing()
}
