package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sharded-dwd/dependency-watchdog/access"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/apimetrics"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// shardingFlagGiven reports whether a flag of the sharding section was given: then `dwd prober` and
// `dwd weeder` shard even behind leader election.
func shardingFlagGiven(fs *pflag.FlagSet) bool {
	given := false
	fs.Visit(func(f *pflag.Flag) {
		if s := f.Annotations[sectionAnnotation]; len(s) > 0 && s[0] == sectionSharding {
			given = true
		}
	})
	return given
}

// needs says what this replica runs, for the permissions it checks.
func (o *options) needs() access.Needs {
	n := access.Needs{Prober: o.proberConfig != nil, Weeder: o.weederConfig != nil, MetricsAuth: o.metricsSecure}
	if o.proberConfig != nil {
		for _, info := range o.proberConfig.DependentResourceInfos {
			if !slices.Contains(n.ScaledKinds, info.Ref.Kind) {
				n.ScaledKinds = append(n.ScaledKinds, info.Ref.Kind)
			}
		}
	}
	if o.leaderElection.enabled {
		n.LeaderNamespace, n.LeaderLease = o.leaderElection.namespace, o.leaderElection.id
	}
	if !o.leaderOnly {
		n.ShardNamespace = o.sharding.Namespace
		if !o.leaderElection.enabled {
			n.WatchedLeaderNamespace = o.leaderElection.namespace
			for _, r := range o.roles() {
				n.WatchedLeaders = append(n.WatchedLeaders, leaderLeaseName(r))
			}
		}
		if o.sharding.LeaveMode == config.LeaveAuto {
			n.PodNamespace = o.pod.Namespace
		}
	}
	return n
}

// accessChecker returns the checker of this replica's permissions on the seed.
func (o *options) accessChecker(log logr.Logger) (*access.Checker, error) {
	cfg := rest.CopyConfig(o.baseRestConfig)
	cfg.Wrap(apimetrics.CountRequests("seed", "access"))
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the access review client: %w", err)
	}
	return &access.Checker{Reviews: client.AuthorizationV1().SelfSubjectAccessReviews(),
		Permissions: access.Required(o.needs()), Log: log}, nil
}

// addAccessChecks makes readiness fail while a required permission is missing or the caches have not
// synced: a replica that cannot read what it watches does nothing, and must not look healthy.
func addAccessChecks(mgr manager.Manager, checker *access.Checker, synced *cacheSync) error {
	if err := mgr.AddReadyzCheck("permissions", checker.ReadyCheck); err != nil {
		return err
	}
	synced.cache, synced.log = mgr.GetCache(), mgr.GetLogger().WithName("caches")
	if err := mgr.Add(synced); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("caches", synced.ReadyCheck)
}

// cacheSync tells whether the manager's caches have synced. The manager starts it only then, so it
// marks the moment the manager went past its caches to start the work.
type cacheSync struct {
	cache interface {
		WaitForCacheSync(ctx context.Context) bool
	}
	log    logr.Logger
	synced atomic.Bool
}

// Start records that the caches synced.
func (c *cacheSync) Start(ctx context.Context) error {
	c.synced.Store(c.cache.WaitForCacheSync(ctx))
	return nil
}

// NeedLeaderElection is false: a standby's caches count as much as the leader's.
func (c *cacheSync) NeedLeaderElection() bool { return false }

// ReadyCheck fails until the caches synced.
func (c *cacheSync) ReadyCheck(*http.Request) error {
	if !c.synced.Load() {
		return errors.New("the seed caches have not synced")
	}
	return nil
}

// metricsOptions serve the metrics, behind authentication and authorization with --metrics-secure.
func (o *options) metricsOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsBindAddress}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		opts.CertDir = o.metricsCertDir
	}
	return opts
}

// leaderLock returns the original's leader lease lock, which records when its renewals were sent so
// that the leader's writes are fenced by them; its client is bounded as controller-runtime's is, so
// that one hung request cannot cost the lease.
func (o *options) leaderLock() (*sharding.FencedLock, error) {
	le := o.leaderElection
	cfg := rest.AddUserAgent(rest.CopyConfig(o.baseRestConfig), "leader-election")
	cfg.Wrap(apimetrics.CountRequests("seed", "leader-election"))
	cfg.Timeout = max(le.renewDeadline/2, time.Second)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	id := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.namespace, le.id, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return nil, fmt.Errorf("creating the leader lock: %w", err)
	}
	return sharding.NewFencedLock(lock, le.renewDeadline, le.leaseDuration, nil), nil
}

// lockInterface returns lock as the manager's option: nil when there is none, so that the manager
// builds its own.
func lockInterface(lock *sharding.FencedLock) resourcelock.Interface {
	if lock == nil {
		return nil
	}
	return lock
}

// eventGate is a manager whose events.k8s.io recorders drop Events while may reports false (the
// replica may not create events.k8s.io Events). dwd records no core/v1 Event: GetEventRecorderFor,
// deprecated, is not gated.
type eventGate struct {
	manager.Manager
	may func() bool
}

// GetEventRecorder returns the manager's events.k8s.io recorder for name, gated.
func (g eventGate) GetEventRecorder(name string) recorder.EventRecorder {
	return access.Recorder(g.Manager.GetEventRecorder(name), g.may)
}
