package replica

import (
	"cmp"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/prober"
)

// Role is a part of the watchdog a replica can run.
type Role string

const (
	RoleProber Role = "prober"
	RoleWeeder Role = "weeder"
)

// GroupFor is the default sharding group of a role. The group of a role never depends on the other
// roles a replica runs: a replica that runs both is a member of both groups, so that adding or
// dropping a role in a rollout is a join or a departure of that role's group and never puts a second
// group on the shoots (docs/sharding.md, "A group per role"). A prober and a weeder deployed side by
// side never share partitions either (each would leave the shoots the other holds unwatched).
func GroupFor(r Role) string {
	return "dwd-" + string(r)
}

// LeaderLeaseName is the leader lease of role r in the original's mode, the original's name for it.
func LeaderLeaseName(r Role) string { return "dwd-" + string(r) + "-leader-election" }

// Options are the settings of one replica.
type Options struct {
	// ProberConfig and WeederConfig are the configs of the roles; a nil one is a role the replica does
	// not run. At least one is required.
	ProberConfig *config.ProberConfig
	WeederConfig *config.WeederConfig
	// Prober are the prober's settings. Config, Owner and Audit are set by the replica.
	Prober prober.Options
	// MaxWeedingWindows bounds the weeding windows open at once; defaults to the weeder's default.
	MaxWeedingWindows int
	// Sharding are the settings of this replica's members. An empty GroupName is the default group of
	// each role (GroupFor); Roles is set per member (ShardingFor).
	Sharding config.Sharding
	// LeaderElection are the original's leader election settings.
	LeaderElection LeaderElection
	// LeaderOnly runs the original's mode: the holder of the leader lease owns every shoot, and no
	// Lease is used but the leader lease. It needs LeaderElection.Enabled.
	LeaderOnly bool
	// Pod is this replica's Pod, from the downward API: Events of the sharding members are recorded on
	// it, and leave mode auto reads it. Its Name is empty outside a Pod; the member name stands for it.
	Pod corev1.ObjectReference
	// Servers are the manager's metrics, health and pprof endpoints.
	Servers Servers
	// AuditLogPath, when set, is the file the ownership audit is appended to (docs/sharding.md).
	AuditLogPath string
	// DryRun is the shadow mode (--dry-run): the replica probes, decides and coordinates as usual, and
	// logs and counts every scale write, pod delete and Event instead of sending it (package dryrun).
	DryRun bool
	// Log is the replica's logger; defaults to controller-runtime's (ctrl.Log).
	Log logr.Logger
}

// LeaderElection are the original's leader election settings: with Enabled, a replica waits for the
// role's leader lease (ID in Namespace) before it works.
type LeaderElection struct {
	Enabled       bool
	ID            string
	Namespace     string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Servers are the addresses of the manager's endpoints ("0" disables one, "" too for pprof).
type Servers struct {
	MetricsBindAddress string
	HealthBindAddress  string
	PprofBindAddress   string
	// MetricsSecure serves the metrics over HTTPS, only to callers the seed authenticates and
	// authorizes; MetricsCertDir holds its tls.crt and tls.key (default: a self-signed certificate).
	MetricsSecure  bool
	MetricsCertDir string
}

// Roles returns the roles the configs ask for, the prober first.
func (o Options) Roles() []Role {
	var roles []Role
	if o.ProberConfig != nil {
		roles = append(roles, RoleProber)
	}
	if o.WeederConfig != nil {
		roles = append(roles, RoleWeeder)
	}
	return roles
}

// ShardingFor is the sharding settings of this replica's member of role r's group: the replica's,
// the group of the role unless Sharding names one, and that role alone.
func (o Options) ShardingFor(r Role) config.Sharding {
	s := o.Sharding
	s.GroupName = cmp.Or(s.GroupName, GroupFor(r))
	if o.DryRun {
		s.DryRun = true
		if !strings.HasSuffix(s.GroupName, config.DryRunGroupSuffix) {
			s.GroupName += config.DryRunGroupSuffix
		}
	}
	s.Roles = []string{string(r)}
	// A group that does not run behind the leader lease itself defers to whoever holds it: the
	// original, or dwd in the original's mode, in the leader election namespace.
	if !o.LeaderElection.Enabled {
		s.LeaderNamespace, s.LeaderLeases = o.LeaderElection.Namespace, []string{LeaderLeaseName(r)}
	}
	return s
}

// Groups names the sharding group of each role the replica runs.
func (o Options) Groups() []string {
	var groups []string
	for _, r := range o.Roles() {
		groups = append(groups, o.ShardingFor(r).GroupName)
	}
	return groups
}
