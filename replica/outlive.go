package replica

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// outliving adds a role's runnables so that they stop only once the role's sharding member stopped
// working on its partitions, not when the manager's context ends: a member that announced its leave
// goes on working for sharding.LeaveLead while the others list its share, and its probes must go on
// with it (docs/sharding.md, "Graceful stops"). Caches are added as they are; the manager stops them
// after everything else anyway.
type outliving struct {
	manager.Manager
	runner outliver
}

// outliver is what outliving needs of a sharding.Runner.
type outliver interface {
	Outlive(ctx context.Context) <-chan struct{}
}

var _ outliver = (*sharding.Runner)(nil)

// Add adds r, which runs until the runner has left once the manager's context ends. A runnable that
// needs no leader election is added as it is: the manager stops that group first, before the runner's,
// so waiting for the runner there would hold the shutdown until its timeout. (The wrapper also hides
// controller-runtime's Warmup, which dwd does not enable.)
func (o outliving) Add(r manager.Runnable) error {
	if _, isCache := r.(interface{ GetCache() cache.Cache }); isCache {
		return o.Manager.Add(r)
	}
	if le, ok := r.(manager.LeaderElectionRunnable); ok && !le.NeedLeaderElection() {
		return o.Manager.Add(r)
	}
	return o.Manager.Add(outlived{run: r, runner: o.runner})
}

// outlived is a runnable whose context ends when its runner no longer works (sharding.Runner.Outlive).
type outlived struct {
	run    manager.Runnable
	runner outliver
}

func (o outlived) Start(ctx context.Context) error {
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-o.runner.Outlive(ctx):
		case <-inner.Done():
		}
		cancel()
	}()
	return o.run.Start(inner)
}

// NeedLeaderElection is true, as the manager assumes of a runnable that does not say: the runner's
// group, which stops after the runnables that need none.
func (o outlived) NeedLeaderElection() bool { return true }
