package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharded-dwd/dependency-watchdog/internal/memlimit"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/replica"
)

// newRunCommand builds `dwd run`, one replica of a sharded group.
func newRunCommand() *cobra.Command {
	// The group is left empty for complete to choose from the roles, which the flags give.
	o := newOptions("")
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one replica of a sharded watchdog group",
		Long: `Run one replica of a sharded watchdog group. The replicas of a group (normally the pods of one
StatefulSet) share the shoot namespaces of the seed: each probes and weeds only the namespaces it owns.
Give --prober-config, --weeder-config or both to choose the roles this replica runs.`,
		Example: `  dwd run --prober-config=/etc/dwd/prober.yaml --weeder-config=/etc/dwd/weeder.yaml --member-name=$(POD_NAME)`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.completeValidateRun(cmd)
		},
	}
	addSection(cmd.Flags(), sectionWatchdog, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.proberConfigPath, "prober-config", "", "Path to the prober config file (the original's format); leave out to run no prober.")
		fs.StringVar(&o.weederConfigPath, "weeder-config", "", "Path to the weeder config file (the original's format); leave out to run no weeder.")
		o.addProberFlags(fs)
		o.addWeederFlags(fs)
	})
	o.addCommonFlags(cmd.Flags())
	addSection(cmd.Flags(), sectionSharding, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.leaderElection.Namespace, "leader-election-namespace", o.leaderElection.Namespace,
			"Namespace of the leader leases of the original's mode ("+replica.LeaderLeaseName(replica.RoleProber)+", "+replica.LeaderLeaseName(replica.RoleWeeder)+
				"): while another process holds the one of a role there (the original, or dwd prober|weeder --enable-leader-election), this replica holds no shoot of that role.")
	})
	// The group's default depends on the roles, which only the parsed flags give.
	group := cmd.Flags().Lookup("shard-group")
	group.Usage += fmt.Sprintf(" (default: %s for the prober, %s for the weeder; a replica that runs both roles is a member of both groups and takes no --shard-group)",
		replica.GroupFor(replica.RoleProber), replica.GroupFor(replica.RoleWeeder))
	return cmd
}

// newRoleCommand builds `dwd prober` or `dwd weeder`, which take the original's command line.
func newRoleCommand(r replica.Role) *cobra.Command {
	o := newOptions(replica.GroupFor(r))
	o.leaderElection.ID = replica.LeaderLeaseName(r)
	cmd := &cobra.Command{
		Use:   string(r),
		Short: roleShort[r],
		Long: roleShort[r] + `.

Takes the command line of the original dependency-watchdog's ` + string(r) + ` command, so that dwd can
replace it without changing a deployment. With --enable-leader-election and no sharding flag it runs as
the original does: the leader owns every shoot, and the only Lease it uses is the leader lease. With a
sharding flag, replicas of the same --shard-group share the shoot namespaces (behind the leader lease
too, if leader election is on).`,
		Example: roleExample[r],
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.proberConfigPath == "" && o.weederConfigPath == "" {
				return fmt.Errorf("--config-file is required")
			}
			o.leaderOnly = o.leaderElection.Enabled && !shardingFlagGiven(cmd.Flags())
			return o.completeValidateRun(cmd)
		},
	}
	o.addRoleFlags(cmd.Flags(), r)
	o.addCommonFlags(cmd.Flags())
	return cmd
}

var roleShort = map[replica.Role]string{
	replica.RoleProber: "Probe shoot API servers and node leases, and scale dependent components down and up",
	replica.RoleWeeder: "Restart CrashLoopBackOff pods when the service they depend on is ready again",
}

var roleExample = map[replica.Role]string{
	replica.RoleProber: `  dwd prober --config-file=/etc/dependency-watchdog/config/dep-config.yaml --kube-api-qps=20.0 \
    --kube-api-burst=100 --zap-log-level=INFO --enable-leader-election=true`,
	replica.RoleWeeder: `  dwd weeder --config-file=/etc/dependency-watchdog/config/dep-config.yaml --enable-leader-election=true`,
}

// completeValidateRun completes and validates the options, prints every problem at once, and runs.
func (o *options) completeValidateRun(cmd *cobra.Command) error {
	errs := o.complete()
	errs = append(errs, o.validate(o.roles())...)
	if err := printErrors(cmd.ErrOrStderr(), errs); err != nil {
		return err
	}
	if o.zap.DestWriter == nil {
		o.zap.DestWriter = cmd.ErrOrStderr()
	}
	return o.run(cmd.Context())
}

// run builds the replica of the options and runs it until ctx ends.
func (o *options) run(ctx context.Context) error {
	// The process logs through one logger; dwd's own lines use it directly, so that they reach it even
	// where controller-runtime's logger was set before (it can be set only once, as tests do).
	logger := zap.New(zap.UseFlagOptions(&o.zap))
	ctrl.SetLogger(logger)
	log := logger.WithName("dwd")
	setMemoryLimit(log)
	o.warnUnknownKeys(log)
	setBuildInfo()
	opts := o.replicaOptions()
	opts.Log = logger
	mode := "sharded"
	if o.leaderOnly {
		mode = "leader owns every shoot"
	}
	log.Info("Starting replica", "version", version, "roles", opts.Roles(), "mode", mode, "groups", opts.Groups(),
		"member", o.sharding.MemberName, "namespace", o.sharding.Namespace, "leaderElection", o.leaderElection.Enabled)
	r, err := replica.New(ctx, o.baseRestConfig, opts)
	if err != nil {
		return err
	}
	return r.Start(ctx)
}

// setMemoryLimit sets the Go memory limit from the cgroup's unless GOMEMLIMIT is set
// (internal/memlimit), and says what it did.
func setMemoryLimit(log logr.Logger) {
	d, err := memlimit.FromCgroup(os.DirFS("/"), os.Getenv, debug.SetMemoryLimit)
	switch {
	case err != nil:
		log.Error(err, "The Go runtime runs without a memory limit: the cgroup's could not be read; set GOMEMLIMIT")
	case d.Env != "":
		log.Info("Go memory limit from GOMEMLIMIT", "GOMEMLIMIT", d.Env)
	case d.Limit > 0:
		log.Info("Go memory limit set from the cgroup's", "limitBytes", d.Limit, "cgroupLimitBytes", d.CgroupLimit,
			"fraction", memlimit.Fraction, "file", "/"+d.File)
	default:
		log.Info("The Go runtime runs without a memory limit: no cgroup memory limit found (memory.max, memory.limit_in_bytes at /sys/fs/cgroup) and GOMEMLIMIT is not set",
			"file", d.File)
	}
}

// replicaOptions are the replica the flags describe, after complete.
func (o *options) replicaOptions() replica.Options {
	return replica.Options{
		ProberConfig: o.proberConfig, WeederConfig: o.weederConfig, Prober: o.proberOptions(),
		MaxWeedingWindows: o.maxWeedingWindows, Sharding: o.sharding, LeaderElection: o.leaderElection,
		LeaderOnly: o.leaderOnly, Pod: o.pod, AuditLogPath: o.auditLogPath, DryRun: o.dryRun,
		Servers: replica.Servers{MetricsBindAddress: o.metricsBindAddress, HealthBindAddress: o.healthBindAddress,
			PprofBindAddress: o.pprofBindAddress, MetricsSecure: o.metricsSecure, MetricsCertDir: o.metricsCertDir},
	}
}

// proberOptions are the prober's settings from the flags.
func (o *options) proberOptions() prober.Options {
	return prober.Options{
		Workers: o.probeWorkers, ConcurrentReconciles: o.concurrentReconciles,
		QPS: float32(o.kubeAPIQPS), Burst: o.kubeAPIBurst,
		UserAgent:    "dwd-prober/" + version + " (" + o.sharding.MemberName + ")",
		ScaleWorkers: o.scaleWorkers, ScaleQPS: o.scaleQPS, ScaleBurst: o.scaleBurst,
		MaxResponseBytes: o.maxResponseBytes, MaxResponseItems: o.maxResponseItems,
		MaxResponseBytesInFlight: o.maxBytesInFlight, AllowInsecureKubeconfigs: o.allowInsecureShoots,
	}
}
