package replica

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/apimetrics"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/weeder"
)

// addShardingRunners adds this replica's member of the sharding group of each role it runs, the role
// under its group's coordinator, and the members' health and readiness checks.
func (r *Replica) addShardingRunners(ctx context.Context, gated manager.Manager) error {
	for _, role := range r.opts.Roles() {
		if err := r.addRoleMember(ctx, gated, role); err != nil {
			return err
		}
	}
	return r.forgoDroppedRoles(ctx)
}

// forgoDroppedRoles ends the returning leave of this member's earlier process in the group of each
// role this process does not run: a rolling update that drops a role is a departure from that role's
// group, so its members take this member's share there at once instead of keeping it for the return
// grace (docs/sharding.md, "A group per role"). It assumes the default group names, and does nothing
// for a replica whose group Options.Sharding names. Failing to is no reason not to start: the share
// then waits for the grace, as before.
func (r *Replica) forgoDroppedRoles(ctx context.Context) error {
	roles := r.opts.Roles()
	for _, role := range roles {
		if r.opts.ShardingFor(role).GroupName != GroupFor(role) {
			return nil // groups named by the options: the other role's group is not known
		}
	}
	cfg := rest.CopyConfig(r.base)
	cfg.Wrap(apimetrics.CountRequests("seed", "sharding"))
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the lease client: %w", err)
	}
	s := r.opts.Sharding
	store := leases.APIStore{Leases: clientset.CoordinationV1().Leases(s.Namespace)}
	log := r.opts.Log.WithName("sharding")
	for _, role := range []Role{RoleProber, RoleWeeder} {
		if slices.Contains(roles, role) {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, s.MemberRenewDeadline)
		wrote, err := leases.ForgoReturn(wctx, store, GroupFor(role), s.MemberName)
		cancel()
		switch {
		case err != nil:
			log.Info("Could not end this member's returning leave in the group of a role it no longer runs; the others keep its share there for the return grace",
				"group", GroupFor(role), "error", err.Error())
		case wrote:
			log.Info("Ended this member's returning leave in the group of a role it no longer runs: the others take its share there at once",
				"group", GroupFor(role), "member", s.MemberName)
		}
	}
	return nil
}

// addRoleMember adds the member of role's group, the role under its coordinator, and its checks.
func (r *Replica) addRoleMember(ctx context.Context, gated manager.Manager, role Role) error {
	s := r.opts.ShardingFor(role)
	opts, err := r.shardingRunnerOptions(gated, s)
	if err != nil {
		return err
	}
	opts.Incarnation = sharding.NewIncarnation()
	auditLog, err := r.openAuditLog(audit.Process{Group: s.GroupName, Member: s.MemberName, Incarnation: opts.Incarnation,
		PartitionFunction: cmp.Or(s.PartitionFunction, sharding.DefaultPartitionFunction),
		Partitions:        s.PartitionCount, RenewDeadline: s.MemberRenewDeadline, LeaseDuration: s.MemberLeaseDuration})
	if err != nil {
		return err
	}
	if auditLog != nil {
		opts.Audit = auditLog
	}
	opts.Namespaces = shootNamespaces(gated.GetCache(), role == RoleProber)
	if share := r.shares[role]; share != nil {
		opts.Caches = share
		r.startShare(ctx, share, opts.Client, s)
	}
	runner := sharding.NewRunner(opts)
	if err := r.mgr.Add(runner); err != nil {
		return err
	}
	if err := r.setupRole(ctx, outliving{Manager: gated, runner: runner}, role, runner.Coordinator(), auditLog); err != nil {
		return err
	}
	check := "sharding-" + string(role)
	if err := r.mgr.AddHealthzCheck(check, runner.HealthCheck); err != nil {
		return err
	}
	// A standby waiting for the original's leader lease stays ready, or a surge rollout would wait on
	// a pod that cannot lead before the old one leaves.
	if r.opts.LeaderElection.Enabled {
		return nil
	}
	return r.mgr.AddReadyzCheck(check, runner.ReadyCheck)
}

// setupRole adds role; owner starts and stops its work as its partitions come and go.
func (r *Replica) setupRole(ctx context.Context, mgr manager.Manager, role Role, owner sharding.Owner, auditLog *audit.Log) error {
	if role == RoleProber {
		opts := r.opts.Prober
		opts.Config, opts.Owner, opts.Audit, opts.DryRun = r.opts.ProberConfig, owner, auditLog, r.dryRun
		opts.NewInformer = r.newInformer
		if _, err := prober.Setup(ctx, mgr, opts); err != nil {
			return fmt.Errorf("setting up the prober: %w", err)
		}
		return nil
	}
	if _, err := weeder.Setup(ctx, mgr, weeder.Options{Config: r.opts.WeederConfig, Owner: owner,
		MaxWindows: r.opts.MaxWeedingWindows, Audit: auditLog, DryRun: r.dryRun}); err != nil {
		return fmt.Errorf("setting up the weeder: %w", err)
	}
	return nil
}

// shardingRunnerOptions are this replica's member of a role's sharding group (settings s), with a
// Lease client whose rate limits cannot slow a handover down and a client of its own for renewals.
func (r *Replica) shardingRunnerOptions(mgr manager.Manager, s config.Sharding) (sharding.RunnerOptions, error) {
	leaseConfig := sharding.LeaseClientConfig(r.base, s.PartitionCount)
	leaseConfig.Wrap(apimetrics.CountRequests("seed", "sharding"))
	leaseClient, err := kubernetes.NewForConfig(leaseConfig)
	if err != nil {
		return sharding.RunnerOptions{}, fmt.Errorf("creating the lease client: %w", err)
	}
	renewalConfig := sharding.RenewalClientConfig(r.base)
	renewalConfig.Wrap(apimetrics.CountRequests("seed", "sharding"))
	renewals, err := kubernetes.NewForConfig(renewalConfig)
	if err != nil {
		return sharding.RunnerOptions{}, fmt.Errorf("creating the member lease client: %w", err)
	}
	opts := sharding.RunnerOptions{Settings: s, Client: leaseClient, Renewals: renewals,
		Log: r.opts.Log.WithName("sharding").WithValues("group", s.GroupName)}
	// Outside a Pod (no Pod name) the member name stands for the pod's; reading it fails if there is
	// no such Pod, and a graceful stop then hands the share over.
	podRef := r.opts.Pod
	pod := sharding.StatefulSetPod{Client: leaseClient, Pod: types.NamespacedName{Namespace: podRef.Namespace, Name: cmp.Or(podRef.Name, s.MemberName)}}
	opts.Departing = pod.Departing
	if s.LeaveMode == config.LeaveAuto {
		// The permissions StatefulSetPod needs are those of leave mode auto (Needs).
		opts.WontReturn = pod.WontReturn
	}
	if podRef.Name != "" {
		opts.Event = podEvent(mgr.GetEventRecorder("dependency-watchdog-sharding"), &r.opts.Pod)
	}
	return opts, nil
}

// shootNamespaces lists the shoot namespaces of the seed from the caches the roles already have:
// the prober's Clusters (named after their namespaces), else the namespaces of the weeder's
// EndpointSlices. It never starts an informer of its own.
func shootNamespaces(c cache.Cache, fromClusters bool) func(ctx context.Context) []string {
	return func(ctx context.Context) []string {
		var names []string
		if fromClusters {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(prober.ClusterGVK.GroupVersion().WithKind("ClusterList"))
			if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
				return nil
			}
			for _, item := range list.Items {
				names = append(names, item.GetName())
			}
			return names
		}
		list := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		for _, item := range list.Items {
			names = append(names, item.Namespace)
		}
		return slices.Compact(slices.Sorted(slices.Values(names)))
	}
}
