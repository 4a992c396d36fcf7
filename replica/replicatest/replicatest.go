// Package replicatest runs the in-process replica of the prober's and weeder's integration tests: a
// controller-runtime manager on the test's control plane with the caches of one role, a member of a
// sharding group whose leases live in a namespace of the test, and the role under that member's
// coordinator, as package replica wires them in the dwd process. The test adds its role through
// Options.Setup, so that a role's test binary links only that role; the role may run on a fake clock
// of the test, so that it steps through probe intervals and weeding windows instead of waiting them
// out, while the member keeps real time (its leases are compared with the API server's).
package replicatest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Options are a test replica.
type Options struct {
	// Seed is the control plane's client config; the member's leases always go through it.
	Seed *rest.Config
	// Through, when set, is the config the role's manager reads and writes the seed through (a proxy
	// a test cuts, say); defaults to Seed.
	Through *rest.Config
	// Group, LeaseNamespace and Member name the replica's member of a sharding group.
	Group, LeaseNamespace, Member string
	// Cache are the role's caches (prober.CacheOptions, weeder.CacheOptions).
	Cache map[client.Object]cache.ByObject
	// Setup adds the role to mgr under owner, the member's coordinator (prober.Setup, weeder.Setup).
	Setup func(ctx context.Context, mgr manager.Manager, owner sharding.Owner) error
}

// Replica is a running test replica; the test's cleanup stops it.
type Replica struct {
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
	if err := opts.Setup(ctx, mgr, r.Runner.Coordinator()); err != nil {
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

// newManager returns the manager of the role, with its caches, serving no metrics.
func newManager(t testing.TB, opts Options) manager.Manager {
	t.Helper()
	if opts.Setup == nil {
		t.Fatal("a test replica needs its role: set Options.Setup")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	through := opts.Through
	if through == nil {
		through = opts.Seed
	}
	mgr, err := ctrl.NewManager(through, manager.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: opts.Cache}})
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	return mgr
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
