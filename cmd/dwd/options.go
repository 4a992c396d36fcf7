package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/replica"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Defaults of the original dependency-watchdog's command line.
const (
	defaultKubeAPIQPS           = 5.0
	defaultKubeAPIBurst         = 10
	defaultMetricsBindAddress   = ":9643"
	defaultHealthBindAddress    = ":9644"
	defaultConcurrentReconciles = 1
	defaultProbeWorkers         = 0
	defaultScaleWorkers         = prober.DefaultScaleWorkers
	defaultScaleQPS             = prober.DefaultScaleQPS
	defaultScaleBurst           = prober.DefaultScaleBurst
	defaultMaxResponseBytes     = prober.DefaultMaxResponseBytes
	defaultMaxResponseItems     = prober.DefaultMaxResponseItems
	minMaxResponseBytes         = 64 << 10
	minMaxResponseItems         = 100
	defaultMaxWeedingWindows    = 100
	defaultLeaderElectionNS     = "garden"
	serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// options are the settings of one replica. They are filled by flags, completed from the environment,
// validated, and then run.
type options struct {
	kubeconfig           string
	kubeAPIQPS           float64
	kubeAPIBurst         int
	metricsBindAddress   string
	healthBindAddress    string
	pprofBindAddress     string
	metricsSecure        bool
	metricsCertDir       string
	concurrentReconciles int
	proberConfigPath     string
	weederConfigPath     string
	probeWorkers         int
	scaleWorkers         int
	scaleQPS             float32
	scaleBurst           int
	maxResponseBytes     int64
	maxResponseItems     int
	maxBytesInFlight     int64
	allowInsecureShoots  bool
	maxWeedingWindows    int
	leaderElection       replica.LeaderElection
	auditLogPath         string
	dryRun               bool
	sharding             config.Sharding
	zap                  zap.Options
	// leaderOnly: `dwd prober` or `dwd weeder` with leader election and no sharding flag run as the
	// original does, the leader owning every shoot, with no Leases but the leader lease.
	leaderOnly bool

	// Set by complete. baseRestConfig is the seed client config every client of the replica starts
	// from.
	baseRestConfig *rest.Config
	proberConfig   *config.ProberConfig
	weederConfig   *config.WeederConfig
	// pod is this replica's Pod from the downward API ($POD_NAME, $POD_NAMESPACE, $POD_UID); its name
	// is empty outside a Pod, and its namespace then the group's.
	pod corev1.ObjectReference
	// unknownKeys are the keys of the config files that the configs do not have, ignored with a
	// warning when the watchdog runs.
	unknownKeys []unknownKey
}

// newOptions returns the defaults of a replica in the given sharding group.
func newOptions(group string) *options {
	return &options{
		kubeAPIQPS:           defaultKubeAPIQPS,
		kubeAPIBurst:         defaultKubeAPIBurst,
		metricsBindAddress:   defaultMetricsBindAddress,
		healthBindAddress:    defaultHealthBindAddress,
		concurrentReconciles: defaultConcurrentReconciles,
		probeWorkers:         defaultProbeWorkers,
		scaleWorkers:         defaultScaleWorkers,
		scaleQPS:             defaultScaleQPS,
		scaleBurst:           defaultScaleBurst,
		maxResponseBytes:     defaultMaxResponseBytes,
		maxResponseItems:     defaultMaxResponseItems,
		maxWeedingWindows:    defaultMaxWeedingWindows,
		leaderElection: replica.LeaderElection{
			Namespace:     defaultLeaderElectionNS,
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
		sharding: config.DefaultSharding(group),
	}
}

// addCommonFlags binds the flags every replica command takes.
func (o *options) addCommonFlags(fs *pflag.FlagSet) {
	addSection(fs, sectionWatchdog, func(fs *pflag.FlagSet) {
		fs.BoolVar(&o.dryRun, "dry-run", o.dryRun, "Shadow mode: probe, decide and coordinate as usual, but scale nothing, delete no pod and record no Event; "+
			"log each such write and count it in dwd_dry_run_writes_total{kind,direction} instead (to run beside the original and compare, docs/operations.md). Off by default.")
	})
	addSection(fs, sectionSharding, o.sharding.AddFlags)
	addSection(fs, sectionClient, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to the seed's kubeconfig (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config).")
		fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", o.kubeAPIQPS, "Queries per second to the seed API server, for every client of the process (>= 0; 0 means client-go's default of 5).")
		fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", o.kubeAPIBurst, "Burst over --kube-api-qps, for every client of the process (>= 0; 0 means client-go's default of 10).")
	})
	addSection(fs, sectionServers, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.metricsBindAddress, "metrics-bind-addr", o.metricsBindAddress, "Address of the Prometheus metrics endpoint (0 disables it).")
		fs.StringVar(&o.healthBindAddress, "health-bind-addr", o.healthBindAddress, "Address of the /healthz and /readyz endpoints (0 disables them).")
		fs.StringVar(&o.pprofBindAddress, "pprof-bind-addr", o.pprofBindAddress, "Address of the pprof endpoint; off unless given.")
		fs.BoolVar(&o.metricsSecure, "metrics-secure", o.metricsSecure, "Serve the metrics endpoint over HTTPS, and only to callers the seed authenticates (TokenReview) and authorizes "+
			"(SubjectAccessReview for get on the /metrics path); needs create on tokenreviews and subjectaccessreviews. Off by default, as in the original.")
		fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", o.metricsCertDir, "Folder with tls.crt and tls.key for --metrics-secure, reloaded when they change (default: a self-signed certificate made in memory).")
	})
	addSection(fs, sectionLogging, func(fs *pflag.FlagSet) {
		zapFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
		o.zap.BindFlags(zapFlags)
		fs.AddGoFlagSet(zapFlags)
		fs.StringVar(&o.auditLogPath, "audit-log", o.auditLogPath, "Append the ownership audit to this file, as JSON lines: every renewal of the member (or leader) lease "+
			"with its fence, every partition acquired and released, every scale write and pod delete sent. `dwd-sim audit FILES...` checks the files "+
			"of all replicas (see docs/sharding.md). Off unless given.")
	})
}

// addProberFlags binds the prober's own flags.
func (o *options) addProberFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.probeWorkers, "probe-workers", o.probeWorkers, "Maximum number of probes in flight; 0 bounds them by the shoots only (each has at most one), so that a shoot that answers late never delays another's probe.")
	fs.IntVar(&o.scaleWorkers, "scale-workers", o.scaleWorkers, "Maximum number of scale flow steps in flight, on a pool of their own beside the probes (>= 1).")
	fs.Float32Var(&o.scaleQPS, "scale-qps", o.scaleQPS, "Queries per second to the seed API server for scaling: the scale path's own budget, independent of "+
		"--kube-api-qps, so that a meltdown of many shoots completes fast on the original's command line (whose scale client was not held to --kube-api-qps) (> 0).")
	fs.IntVar(&o.scaleBurst, "scale-burst", o.scaleBurst, "Burst over --scale-qps, for scaling only (>= 1).")
	fs.Int64Var(&o.maxResponseBytes, "shoot-max-response-bytes", o.maxResponseBytes, "Largest answer, in bytes, read from a shoot API server; a larger one makes the probe inconclusive (no action) (>= 65536).")
	fs.IntVar(&o.maxResponseItems, "shoot-max-response-items", o.maxResponseItems, "Most items (nodes, leases) read from one shoot list; more make the probe inconclusive (no action) (>= 100).")
	fs.Int64Var(&o.maxBytesInFlight, "shoot-max-response-bytes-in-flight", o.maxBytesInFlight, "Most bytes of shoot answers the replica holds at once, "+
		"from their arrival until they are decoded; an answer with no room within probeTimeout makes its probe inconclusive (no action). "+
		"0: an eighth of the Go memory limit (GOMEMLIMIT) when one is set, else 64 MiB, never less than --shoot-max-response-bytes "+
		"(0, or >= --shoot-max-response-bytes).")
	fs.BoolVar(&o.allowInsecureShoots, "allow-insecure-shoot-kubeconfigs", o.allowInsecureShoots, "Accept shoot kubeconfigs with "+
		"insecure-skip-tls-verify or a plain http:// server, which are refused otherwise. For labs only: whoever can answer for a shoot's "+
		"address could then fake its node leases.")
}

// addWeederFlags binds the weeder's own flags.
func (o *options) addWeederFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.maxWeedingWindows, "max-weeding-windows", o.maxWeedingWindows, "Maximum number of weeding windows (pod watches of one service's dependants) open at once; more wait in a queue, oldest first.")
}

// addRoleFlags binds the flags only the original's `prober` and `weeder` commands have.
func (o *options) addRoleFlags(fs *pflag.FlagSet, r replica.Role) {
	path := &o.proberConfigPath
	if r == replica.RoleWeeder {
		path = &o.weederConfigPath
	}
	addSection(fs, sectionWatchdog, func(fs *pflag.FlagSet) {
		fs.StringVar(path, "config-file", "", "Path to the "+string(r)+" config file (YAML), as in the original dependency-watchdog.")
		fs.IntVar(&o.concurrentReconciles, "concurrent-reconciles", o.concurrentReconciles, "Maximum number of concurrent reconciles of the "+string(r)+"'s controllers.")
		if r == replica.RoleProber {
			o.addProberFlags(fs)
		} else {
			o.addWeederFlags(fs)
		}
	})
	le := &o.leaderElection
	addSection(fs, sectionLeaderElection, func(fs *pflag.FlagSet) {
		fs.BoolVar(&le.Enabled, "enable-leader-election", le.Enabled, "Wait for the "+string(r)+"'s leader lease before doing any work (the original's single-active-replica mode).")
		fs.StringVar(&le.Namespace, "leader-election-namespace", le.Namespace, "Namespace of the leader lease. A sharded replica not behind --enable-leader-election holds no shoot while another process holds its role's leader lease there (the original, or dwd in the original's mode).")
		fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration, "How long a non-leader waits after the last observed renewal before taking the leader lease.")
		fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline, "How long the leader keeps trying to renew before it gives up leadership.")
		fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod, "Interval between attempts to take or renew the leader lease.")
	})
}

// complete fills in what the flags left open from the roles and the environment, loads the config files
// and builds the seed client config. It reports every problem it finds at once.
func (o *options) complete() field.ErrorList {
	o.completeSharding()
	errs := o.loadConfigs(false)
	cfg, err := o.buildRestConfig()
	if err != nil {
		errs = append(errs, field.Invalid(field.NewPath("--kubeconfig"), o.kubeconfig, err.Error()))
		return errs
	}
	o.baseRestConfig = cfg
	return errs
}

// completeSharding fills in the sharding settings the flags left open: the group from the role of a
// replica that runs one (one that runs both has a group per role, shardingFor), the member name and
// namespace from the Pod or the host, and the roles and Pod UID the members of a group compare.
func (o *options) completeSharding() {
	roles := o.roles()
	if o.sharding.GroupName == "" && len(roles) == 1 {
		o.sharding.GroupName = replica.GroupFor(roles[0])
	}
	var names []string
	for _, r := range roles {
		names = append(names, string(r))
	}
	o.sharding.Roles = names
	if o.sharding.MemberName == "" {
		o.sharding.MemberName = defaultMemberName()
	}
	if o.sharding.Namespace == "" {
		o.sharding.Namespace = defaultNamespace(o.leaderElection.Namespace)
	}
	o.pod = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Name: os.Getenv("POD_NAME"),
		Namespace: cmp.Or(os.Getenv("POD_NAMESPACE"), o.sharding.Namespace), UID: types.UID(os.Getenv("POD_UID"))}
	o.sharding.PodUID = string(o.pod.UID)
}

// loadConfigs loads the prober and weeder configs that were given. Strict, a key that a config does
// not have is an error, as `dwd config validate` reports it. Otherwise it is no error, as in the
// original, so that a config written for another version of it cannot crash-loop the watchdog: it is
// kept in unknownKeys for a warning at start, and counted. Every other problem is an error either way.
func (o *options) loadConfigs(strict bool) field.ErrorList {
	var errs field.ErrorList
	if o.proberConfigPath != "" {
		cfg, unknown, fileErrs := config.ReadProberConfig(o.proberConfigPath)
		o.proberConfig = cfg
		errs = append(errs, o.acceptUnknownKeys(replica.RoleProber, o.proberConfigPath, unknown, fileErrs, strict)...)
	}
	if o.weederConfigPath != "" {
		cfg, unknown, fileErrs := config.ReadWeederConfig(o.weederConfigPath)
		o.weederConfig = cfg
		errs = append(errs, o.acceptUnknownKeys(replica.RoleWeeder, o.weederConfigPath, unknown, fileErrs, strict)...)
	}
	if len(errs) > 0 {
		o.proberConfig, o.weederConfig = nil, nil
	}
	return errs
}

// acceptUnknownKeys returns the problems of the config file at path: its errors, and its unknown keys
// when strict or when the file fails anyway (a misspelt key often explains a missing one). Otherwise
// it keeps the unknown keys for a warning and counts them.
func (o *options) acceptUnknownKeys(kind replica.Role, path string, unknown, fileErrs field.ErrorList, strict bool) field.ErrorList {
	if strict || len(fileErrs) > 0 {
		return prefixErrors(path, append(unknown, fileErrs...))
	}
	for _, e := range unknown {
		o.unknownKeys = append(o.unknownKeys, unknownKey{kind: kind, file: path, field: e.Field})
	}
	countUnknownKeys(kind, len(unknown))
	return nil
}

// prefixErrors roots the field paths of a file's errors at the file's name, so that every line says
// which file it is about.
func prefixErrors(path string, errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		e := *e
		if e.Field == "" || e.Field == "<nil>" {
			e.Field = path
		} else {
			e.Field = path + ": " + e.Field
		}
		out = append(out, &e)
	}
	return out
}

// buildRestConfig builds the one seed client config every client of the process shares, so that the
// QPS and burst flags apply everywhere.
func (o *options) buildRestConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			// A decoder's error may quote the file's credentials; it is printed, so it must not.
			data, _ := os.ReadFile(o.kubeconfig)
			return nil, prober.KubeconfigError("reading the kubeconfig", err, data)
		}
	} else {
		cfg, err = ctrlconfig.GetConfig()
		if err != nil {
			return nil, prober.KubeconfigError("finding the seed's kubeconfig", err, defaultKubeconfigs())
		}
	}
	cfg.QPS = float32(o.kubeAPIQPS)
	cfg.Burst = o.kubeAPIBurst
	cfg.UserAgent = "dwd/" + version
	return cfg, nil
}

// defaultKubeconfigs returns the contents of the kubeconfig files controller-runtime reads without
// --kubeconfig ($KUBECONFIG, ~/.kube/config), to keep their values out of its errors.
func defaultKubeconfigs() []byte {
	paths := filepath.SplitList(os.Getenv(clientcmd.RecommendedConfigPathEnvVar))
	if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName))
	}
	var all []byte
	for _, path := range paths {
		if data, err := os.ReadFile(path); err == nil {
			all = append(append(all, data...), '\n')
		}
	}
	return all
}

// validate checks the flags of a command that runs the given roles, after complete.
func (o *options) validate(roles []replica.Role) field.ErrorList {
	var errs field.ErrorList
	if len(roles) == 0 {
		errs = append(errs, field.Required(field.NewPath("--prober-config"), "give --prober-config, --weeder-config or both"))
	}
	if o.kubeAPIQPS < 0 {
		errs = append(errs, field.Invalid(field.NewPath("--kube-api-qps"), o.kubeAPIQPS, "must be >= 0"))
	}
	if o.kubeAPIBurst < 0 {
		errs = append(errs, field.Invalid(field.NewPath("--kube-api-burst"), o.kubeAPIBurst, "must be >= 0"))
	}
	errs = append(errs, o.validateProberFlags()...)
	if o.maxWeedingWindows < 1 {
		errs = append(errs, field.Invalid(field.NewPath("--max-weeding-windows"), o.maxWeedingWindows, "must be at least 1"))
	}
	if o.concurrentReconciles < 1 {
		errs = append(errs, field.Invalid(field.NewPath("--concurrent-reconciles"), o.concurrentReconciles, "must be at least 1"))
	}
	errs = append(errs, validateLeaderElection(o.leaderElection)...)
	if !o.dryRun && strings.HasSuffix(o.sharding.GroupName, config.DryRunGroupSuffix) {
		errs = append(errs, field.Invalid(field.NewPath("--shard-group"), o.sharding.GroupName,
			"a group whose name ends in "+config.DryRunGroupSuffix+" is a shadow's (--dry-run): a replica that acts must not join it"))
	}
	if o.dryRun && o.leaderElection.Enabled {
		errs = append(errs, field.Invalid(field.NewPath("--enable-leader-election"), true,
			"--dry-run runs as a sharded group of its own beside the original: it must not take the original's leader lease, which would stop the original while the shadow acts on nothing; leave --enable-leader-election out"))
	}
	if len(roles) > 1 && o.sharding.GroupName != "" {
		errs = append(errs, field.Invalid(field.NewPath("--shard-group"), o.sharding.GroupName, fmt.Sprintf(
			"a replica that runs both roles is a member of the prober's group (%s) and of the weeder's (%s), so that adding or dropping a role never moves the other to a new group; leave --shard-group out, or run each role in a process of its own",
			replica.GroupFor(replica.RoleProber), replica.GroupFor(replica.RoleWeeder))))
		return errs
	}
	// The members of both roles share every setting but the group and the role.
	s := o.shardingFor(append(roles, replica.RoleProber)[0])
	return append(errs, s.Validate()...)
}

// shardingFor is the sharding settings of this replica's member of role r's group
// (replica.Options.ShardingFor).
func (o *options) shardingFor(r replica.Role) config.Sharding {
	return replica.Options{Sharding: o.sharding, LeaderElection: o.leaderElection, DryRun: o.dryRun}.ShardingFor(r)
}

// validateProberFlags checks the prober's own flags.
func (o *options) validateProberFlags() field.ErrorList {
	var errs field.ErrorList
	if o.probeWorkers < 0 {
		errs = append(errs, field.Invalid(field.NewPath("--probe-workers"), o.probeWorkers, "must not be negative"))
	}
	if o.scaleWorkers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("--scale-workers"), o.scaleWorkers, "must be at least 1"))
	}
	if !(o.scaleQPS > 0) {
		errs = append(errs, field.Invalid(field.NewPath("--scale-qps"), o.scaleQPS, "must be greater than 0"))
	}
	if o.scaleBurst < 1 {
		errs = append(errs, field.Invalid(field.NewPath("--scale-burst"), o.scaleBurst, "must be at least 1"))
	}
	if o.maxResponseBytes < minMaxResponseBytes {
		errs = append(errs, field.Invalid(field.NewPath("--shoot-max-response-bytes"), o.maxResponseBytes, "must be at least 65536 (64 KiB)"))
	}
	if o.maxResponseItems < minMaxResponseItems {
		errs = append(errs, field.Invalid(field.NewPath("--shoot-max-response-items"), o.maxResponseItems, "must be at least 100"))
	}
	if o.maxBytesInFlight != 0 && o.maxBytesInFlight < o.maxResponseBytes {
		errs = append(errs, field.Invalid(field.NewPath("--shoot-max-response-bytes-in-flight"), o.maxBytesInFlight,
			"must be 0 (derived from the memory limit) or at least --shoot-max-response-bytes, else an answer within that bound could never be read"))
	}
	return errs
}

// validateLeaderElection checks the leader election flags when leader election is on.
func validateLeaderElection(le replica.LeaderElection) field.ErrorList {
	if !le.Enabled {
		return nil
	}
	var errs field.ErrorList
	if le.Namespace == "" {
		errs = append(errs, field.Required(field.NewPath("--leader-election-namespace"), ""))
	}
	// The lease records its duration in whole seconds, and the others wait that long: the renew
	// deadline, where the leader stops writing, must be shorter than the duration they read.
	if le.RetryPeriod <= 0 || le.RenewDeadline <= le.RetryPeriod || le.LeaseDuration.Truncate(time.Second) <= le.RenewDeadline {
		errs = append(errs, field.Invalid(field.NewPath("--leader-elect-renew-deadline"), le.RenewDeadline.String(),
			"need 0 < --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration in whole seconds"))
	} else if sharding.LeaderFenceWindow(le.RenewDeadline, le.LeaseDuration) <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("--leader-elect-lease-duration"), le.LeaseDuration.String(),
			fmt.Sprintf("leaves no time to write: the leader stops writing %s before the lease could be taken over (the larger of %s and %d%% of it)",
				config.FenceMargin(le.LeaseDuration), config.MinFenceMargin, config.MinFenceMarginPercent)))
	}
	return errs
}

// roles returns the roles the loaded configs ask for.
func (o *options) roles() []replica.Role {
	var roles []replica.Role
	if o.proberConfigPath != "" {
		roles = append(roles, replica.RoleProber)
	}
	if o.weederConfigPath != "" {
		roles = append(roles, replica.RoleWeeder)
	}
	return roles
}

// defaultMemberName is the pod name when the downward API gives it, else the hostname (a StatefulSet
// pod's hostname is its name).
func defaultMemberName() string {
	if name := os.Getenv("POD_NAME"); name != "" {
		return name
	}
	name, err := os.Hostname()
	if err != nil {
		return ""
	}
	return strings.ToLower(name)
}

// defaultNamespace is the pod's namespace when it can be found, else fallback.
func defaultNamespace(fallback string) string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return fallback
}

// printErrors prints one problem per line and returns errInvalid, or nil when there is none.
func printErrors(w interface{ Write([]byte) (int, error) }, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	for _, e := range errs {
		fmt.Fprintln(w, e.Error())
	}
	return errInvalid
}

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
