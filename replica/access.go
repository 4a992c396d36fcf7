package replica

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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sharded-dwd/dependency-watchdog/access"
	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/internal/apimetrics"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Needs says what a replica of opts runs, for the permissions it checks.
func (o Options) Needs() access.Needs {
	n := access.Needs{Prober: o.ProberConfig != nil, Weeder: o.WeederConfig != nil, MetricsAuth: o.Servers.MetricsSecure, DryRun: o.DryRun}
	if o.ProberConfig != nil {
		for _, info := range o.ProberConfig.DependentResourceInfos {
			if !slices.Contains(n.ScaledKinds, info.Ref.Kind) {
				n.ScaledKinds = append(n.ScaledKinds, info.Ref.Kind)
			}
		}
	}
	le := o.LeaderElection
	if le.Enabled {
		n.LeaderNamespace, n.LeaderLease = le.Namespace, le.ID
	}
	if o.LeaderOnly {
		return n
	}
	n.ShardNamespace = o.Sharding.Namespace
	if !le.Enabled {
		n.WatchedLeaderNamespace = le.Namespace
		for _, r := range o.Roles() {
			n.WatchedLeaders = append(n.WatchedLeaders, LeaderLeaseName(r))
		}
	}
	if o.Sharding.LeaveMode == config.LeaveAuto {
		n.PodNamespace = o.Pod.Namespace
	}
	return n
}

// accessChecker returns the checker of this replica's permissions on the seed.
func (r *Replica) accessChecker() (*access.Checker, error) {
	cfg := rest.CopyConfig(r.base)
	cfg.Wrap(apimetrics.CountRequests("seed", "access"))
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the access review client: %w", err)
	}
	return &access.Checker{Reviews: client.AuthorizationV1().SelfSubjectAccessReviews(),
		Permissions: access.Required(r.opts.Needs()), Log: r.opts.Log.WithName("access")}, nil
}

// addAccessChecks makes readiness fail while a required permission is missing or the caches have not
// synced: a replica that cannot read what it watches does nothing, and must not look healthy.
func (r *Replica) addAccessChecks() error {
	if err := r.mgr.AddReadyzCheck("permissions", r.checker.ReadyCheck); err != nil {
		return err
	}
	r.synced.cache, r.synced.log = r.mgr.GetCache(), r.mgr.GetLogger().WithName("caches")
	if err := r.mgr.Add(r.synced); err != nil {
		return err
	}
	return r.mgr.AddReadyzCheck("caches", r.synced.ReadyCheck)
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

// metricsOptions serve the metrics, behind authentication and authorization with MetricsSecure.
func (r *Replica) metricsOptions() metricsserver.Options {
	servers := r.opts.Servers
	opts := metricsserver.Options{BindAddress: servers.MetricsBindAddress}
	if servers.MetricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		opts.CertDir = servers.MetricsCertDir
	}
	return opts
}

// newLeader returns the Leader of the original's mode, behind the leader lease of the options, and
// opens its audit log. Its lock records when the renewals were sent so that the leader's writes are
// fenced by them; its client is bounded as controller-runtime's is, so that one hung request cannot
// cost the lease.
func (r *Replica) newLeader() (*sharding.Leader, error) {
	le := r.opts.LeaderElection
	cfg := rest.AddUserAgent(rest.CopyConfig(r.base), "leader-election")
	cfg.Wrap(apimetrics.CountRequests("seed", "leader-election"))
	cfg.Timeout = max(le.RenewDeadline/2, time.Second)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	// The metrics name the member by the host name (the pod's name), as a member of a sharded group is
	// named: the identity's UUID would make every restart a new series.
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	uid := string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.ID, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + uid})
	if err != nil {
		return nil, fmt.Errorf("creating the leader lock: %w", err)
	}
	// The audit names the leader lease as the group, so that the checker tells the original's mode
	// from the sharded group of the same role and fails writes of both to one namespace
	// (auditcheck.Report.CrossGroupWrites).
	auditLog, err := r.openAuditLog(audit.Process{Group: le.ID, Member: host, Incarnation: uid,
		Partitions: sharding.LeaderPartitions, RenewDeadline: le.RenewDeadline, LeaseDuration: le.LeaseDuration})
	if err != nil {
		return nil, err
	}
	opts := sharding.LeaderOptions{Group: r.opts.Sharding.GroupName, Member: host, Lock: lock,
		RenewDeadline: le.RenewDeadline, LeaseDuration: le.LeaseDuration, Log: r.opts.Log.WithName("leader")}
	if auditLog != nil {
		opts.Audit, r.leaderAudit = auditLog, auditLog
	}
	return sharding.NewLeader(opts), nil
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
	// dryRun, when set, takes every Event instead (the shadow mode).
	dryRun *dryrun.Writes
}

// GetEventRecorder returns the manager's events.k8s.io recorder for name, gated; in dry run the one
// that records none.
func (g eventGate) GetEventRecorder(name string) recorder.EventRecorder {
	if g.dryRun != nil {
		return g.dryRun.Recorder()
	}
	return access.Recorder(g.Manager.GetEventRecorder(name), g.may)
}

// podEvent returns the sharding Runner's Event hook, which records events.k8s.io Events on pod
// through recorder.
func podEvent(recorder recorder.EventRecorder, pod *corev1.ObjectReference) func(eventType, reason, action, message string) {
	return func(eventType, reason, action, message string) {
		recorder.Eventf(pod, nil, eventType, reason, action, "%s", message)
	}
}
