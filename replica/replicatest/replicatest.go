// Package replicatest runs the in-process replica of the prober's and the weeder's integration tests:
// a controller-runtime manager on the test's control plane with the caches of one role, a member of a
// sharding group whose leases live in a namespace of the test, and the role under that member's
// coordinator, as package replica wires them in the dwd process. The role may run on a fake clock
// (Options.Clock), so that a test steps through probe intervals and weeding windows instead of waiting
// them out; the member keeps real time, since its leases are compared with the API server's.
package replicatest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/weeder"
)

// Options are a test replica: exactly one of Prober and Weeder is set.
type Options struct {
	// Seed is the control plane's client config; the member's leases always go through it.
	Seed *rest.Config
	// Through, when set, is the config the role's manager reads and writes the seed through (a proxy
	// a test cuts, say); defaults to Seed.
	Through *rest.Config
	// Group, LeaseNamespace and Member name the replica's member of a sharding group.
	Group, LeaseNamespace, Member string
	// Prober runs the prober with these options; Owner and PartitionCount are set here, and Clock
	// defaults to Options.Clock.
	Prober *prober.Options
	// Weeder runs the weeder with these options; Owner and PartitionCount are set here, and Clock
	// defaults to Options.Clock.
	Weeder *weeder.Options
	// Clock is the role's time; defaults to the real clock.
	Clock clock.WithTicker
}

// Replica is a running test replica; the test's cleanup stops it.
type Replica struct {
	// Prober or Weeder is the role it runs.
	Prober *prober.Manager
	Weeder *weeder.Manager
	// Runner is its member of the sharding group.
	Runner *sharding.Runner
	stop   func()
}

// Start runs the replica of opts until the test ends or Stop, and waits until its member holds its
// share (the Runner is ready).
func Start(t testing.TB, opts Options) *Replica {
	t.Helper()
	mgr := newManager(t, opts)
	settings := config.DefaultSharding(opts.Group)
	settings.Namespace, settings.MemberName = opts.LeaseNamespace, opts.Member
	leaseClient, err := kubernetes.NewForConfig(sharding.LeaseClientConfig(opts.Seed, settings.PartitionCount))
	if err != nil {
		t.Fatalf("creating the lease client: %v", err)
	}
	r := &Replica{Runner: sharding.NewRunner(sharding.RunnerOptions{Settings: settings, Client: leaseClient})}
	if err := mgr.Add(r.Runner); err != nil {
		t.Fatalf("adding the sharding member: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.setupRole(ctx, mgr, opts, settings.PartitionCount); err != nil {
		cancel()
		t.Fatalf("setting up the role: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	r.stop = func() { cancel(); <-done }
	t.Cleanup(r.Stop)
	awaitReady(t, r.Runner)
	return r
}

// Stop stops the replica and waits until it has; its member leaves the group. Stopping twice is fine.
func (r *Replica) Stop() { r.stop() }

// Owns tells whether the replica owns namespace now.
func (r *Replica) Owns(namespace string) bool { return r.Runner.Coordinator().Owns(namespace) }

// newManager returns the manager of the role opts asks for, with its caches, serving no metrics.
func newManager(t testing.TB, opts Options) manager.Manager {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var byObject map[client.Object]cache.ByObject
	var err error
	switch {
	case opts.Prober != nil && opts.Weeder == nil:
		byObject = prober.CacheOptions(opts.Prober.Config)
	case opts.Weeder != nil && opts.Prober == nil:
		byObject, err = weeder.CacheOptions(opts.Weeder.Config)
	default:
		t.Fatal("a test replica runs the prober or the weeder: set one of Options.Prober and Options.Weeder")
	}
	if err != nil {
		t.Fatalf("the weeder's caches: %v", err)
	}
	through := opts.Through
	if through == nil {
		through = opts.Seed
	}
	mgr, err := ctrl.NewManager(through, manager.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: byObject}})
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	return mgr
}

// setupRole adds the role of opts to mgr under the replica's coordinator.
func (r *Replica) setupRole(ctx context.Context, mgr manager.Manager, opts Options, partitions int) error {
	var err error
	if opts.Prober != nil {
		p := *opts.Prober
		p.Owner, p.PartitionCount = r.Runner.Coordinator(), partitions
		if p.Clock == nil {
			p.Clock = opts.Clock
		}
		r.Prober, err = prober.Setup(ctx, mgr, p)
		return err
	}
	w := *opts.Weeder
	w.Owner, w.PartitionCount = r.Runner.Coordinator(), partitions
	if w.Clock == nil {
		w.Clock = opts.Clock
	}
	r.Weeder, err = weeder.Setup(ctx, mgr, w)
	return err
}

// awaitReady waits until runner holds its share.
func awaitReady(t testing.TB, runner *sharding.Runner) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for runner.ReadyCheck(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the sharding member was not ready within 20 s: %v", runner.ReadyCheck(nil))
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal("the test ended before the sharding member was ready")
		}
	}
}
