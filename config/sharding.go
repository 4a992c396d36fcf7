package config

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Defaults of the sharding settings. The member lease timings are Kubernetes leader election's.
const (
	DefaultMemberLeaseDuration = 15 * time.Second
	DefaultMemberRenewDeadline = 10 * time.Second
	DefaultMemberRetryPeriod   = 2 * time.Second
	// DefaultReturnGrace is how long a member restarting gracefully keeps its share; docs/sharding.md
	// gives the measurement it rests on.
	DefaultReturnGrace = 30 * time.Second
	// The ring defaults were chosen by measurement; package sharding documents the table.
	DefaultPartitionCount    = 887
	DefaultRingLoadBound     = 1.02
	DefaultReplicationFactor = 400
	// MaxPartitionCount bounds the number of partition leases a group may have.
	MaxPartitionCount = 10000
	// MaxReplicationFactor bounds the ring's points per member, which its build time grows with.
	MaxReplicationFactor = 1000
	// MinFenceMargin is the least time between the renew deadline and the end of the member lease
	// (MemberLeaseDuration − MemberRenewDeadline); see Sharding.Validate for what it covers.
	MinFenceMargin = 2 * time.Second
	// MinFenceMarginPercent is the least fence margin as a share of the member lease duration, since
	// clock-rate drift and stop latency grow with it.
	MinFenceMarginPercent = 20
	// MaxReturnGrace bounds ReturnGrace: a member that has not come back by then has most likely not
	// restarted, and its shoots would stay unwatched for all of it.
	MaxReturnGrace = 10 * time.Minute
)

// Partition functions: how a shoot namespace maps to its partition (package sharding implements them).
const (
	// PartitionFNVRange makes partition p the contiguous range [p·2⁶⁴/P, (p+1)·2⁶⁴/P) of the 64-bit
	// FNV-1a hash of the namespace, the hash the API server's shard selectors range over, so that a
	// replica's share can be selected on the server side.
	PartitionFNVRange = "fnv1a64-range-v1"
	// PartitionXXHashMod is xxhash(namespace) mod P, the function of dwd before shard selectors; a
	// group that has not migrated keeps it.
	PartitionXXHashMod = "xxhash64-mod-v1"
	// DefaultPartitionFunction is the partition function of a new group.
	DefaultPartitionFunction = PartitionFNVRange
)

// PartitionFunctions are the partition functions a group may use.
var PartitionFunctions = []string{PartitionFNVRange, PartitionXXHashMod}

// Cache sharding: what a replica's seed caches hold of the shoots.
const (
	// CacheShardingServer caches the replica's share only and asks the API server to send only that
	// (shard selectors, feature gate ShardedListAndWatch); where the server ignores the selector the
	// replica filters what it receives.
	CacheShardingServer = "server"
	// CacheShardingClient caches the replica's share only, filtering what it receives.
	CacheShardingClient = "client"
	// CacheShardingOff caches every shoot of the seed on every replica.
	CacheShardingOff = "off"
	// DefaultCacheSharding is what a replica does without --cache-sharding.
	DefaultCacheSharding = CacheShardingClient
)

// CacheShardings are the values of --cache-sharding.
var CacheShardings = []string{CacheShardingServer, CacheShardingClient, CacheShardingOff}

// Sharding holds the settings of the replica group that shares the shoot namespaces: which Leases the
// replicas coordinate through, how long a member lease lasts, and how the hash ring is built.
//
// They are command-line settings, so validation names the flags.
type Sharding struct {
	// GroupName prefixes every Lease of the group: <group>-member-<name>, <group>-partition-<k>.
	GroupName string
	// Namespace holds the group's Leases, normally the watchdog's own namespace.
	Namespace string
	// MemberName identifies this replica (its pod name).
	MemberName string
	// PartitionCount is the number of partitions shoot namespaces are hashed into.
	PartitionCount int
	// PartitionFunction is how a namespace maps to its partition (PartitionFunctions); members of a
	// group must agree.
	PartitionFunction string
	// CacheSharding is what the replica's seed caches hold of the shoots (CacheShardings): its share
	// only, selected by the server or filtered by the replica, or every shoot.
	CacheSharding string
	// MemberLeaseDuration is how long a member lease is valid after its last observed renewal.
	MemberLeaseDuration time.Duration
	// MemberRenewDeadline is how long a member keeps working without a successful renewal before it
	// stops all work (self-fencing); it must be below MemberLeaseDuration by at least MinFenceMargin
	// and MinFenceMarginPercent of it.
	MemberRenewDeadline time.Duration
	// MemberRetryPeriod is the interval between renewals.
	MemberRetryPeriod time.Duration
	// RingLoadBound is the bounded-load factor of the ring: no member holds more than this times the
	// mean number of partitions (rounded up).
	RingLoadBound float64
	// ReplicationFactor is the number of points each member has on the ring.
	ReplicationFactor int
	// LeaveMode says what a graceful stop does with this member's share: LeaveAuto decides from the
	// StatefulSet (a rolling restart returns, a scale-down hands over), LeaveReturn keeps the share
	// reserved for ReturnGrace, LeaveHandover hands it to the others at once.
	LeaveMode string
	// ReturnGrace is how long the others keep a returning member's partitions reserved for it.
	ReturnGrace time.Duration
	// PodUID is the UID of this replica's Pod ($POD_UID): a process in the same Pod as the last holder
	// of the member lease may take it over at once, since the kubelet starts a container only after
	// the previous one exited.
	PodUID string
	// Roles are the roles this replica runs ("prober", "weeder"); members of one group must agree.
	Roles []string
	// LeaderLeases name the leader leases, in LeaderNamespace, of the original's mode for Roles (the
	// original dependency-watchdog's, which dwd prober|weeder --enable-leader-election also takes):
	// while one is held and renewed, the member holds no partition. None: nothing is watched.
	LeaderLeases    []string
	LeaderNamespace string
	// DryRun is a member of a shadow group (--dry-run), which writes nothing to a shoot's control plane:
	// it advertises so in its settings, defers to no other group or leader, and no other group defers
	// to it. Its group name ends in DryRunGroupSuffix, so that it never joins a group that acts.
	DryRun bool
}

// DryRunGroupSuffix ends the name of every group in dry run.
const DryRunGroupSuffix = "-dry-run"

// Values of Sharding.LeaveMode.
const (
	LeaveAuto     = "auto"
	LeaveReturn   = "return"
	LeaveHandover = "handover"
)

// DefaultSharding returns the sharding settings for a group, with every default filled in except the
// member name and namespace, which depend on where the replica runs.
func DefaultSharding(group string) Sharding {
	return Sharding{
		GroupName:           group,
		PartitionCount:      DefaultPartitionCount,
		PartitionFunction:   DefaultPartitionFunction,
		CacheSharding:       DefaultCacheSharding,
		MemberLeaseDuration: DefaultMemberLeaseDuration,
		MemberRenewDeadline: DefaultMemberRenewDeadline,
		MemberRetryPeriod:   DefaultMemberRetryPeriod,
		RingLoadBound:       DefaultRingLoadBound,
		ReplicationFactor:   DefaultReplicationFactor,
		LeaveMode:           LeaveAuto,
		ReturnGrace:         DefaultReturnGrace,
	}
}

// AddFlags binds the settings to flags, with the values in s as defaults.
func (s *Sharding) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.GroupName, "shard-group", s.GroupName, "Name of the replica group; prefixes its member and partition Leases. Replicas of one group share the shoot namespaces.")
	fs.StringVar(&s.Namespace, "shard-namespace", s.Namespace, "Namespace of the group's Leases (default: $POD_NAMESPACE, else the in-cluster service account's namespace, else garden).")
	fs.StringVar(&s.MemberName, "member-name", s.MemberName, "Name of this replica in the group (default: $POD_NAME, else the hostname).")
	fs.IntVar(&s.PartitionCount, "partitions", s.PartitionCount, "Number of partitions the shoot namespaces are hashed into. All replicas of a group must agree.")
	fs.StringVar(&s.PartitionFunction, "partition-function", s.PartitionFunction, "How a shoot namespace maps to its partition: "+PartitionFNVRange+" (ranges of the namespace's FNV-1a hash, which the API server can select) or "+PartitionXXHashMod+" (dwd before shard selectors; keep it until the group migrates, docs/sharding.md). All replicas of a group must agree.")
	fs.StringVar(&s.CacheSharding, "cache-sharding", s.CacheSharding, "What the replica caches of the seed's shoots: server (its share only, selected by the API server; needs --partition-function="+PartitionFNVRange+" and the API server's feature gate ShardedListAndWatch, else the replica filters), client (its share only, filtered by the replica) or off (every shoot).")
	fs.DurationVar(&s.MemberLeaseDuration, "member-lease-duration", s.MemberLeaseDuration, "How long a member lease stays valid after its last renewal; a crashed replica's shoots move after this long.")
	fs.DurationVar(&s.MemberRenewDeadline, "member-renew-deadline", s.MemberRenewDeadline, fmt.Sprintf("A replica that has not renewed its member lease for this long stops all work. Must be below --member-lease-duration by at least %s and by %d%% of it.", MinFenceMargin, MinFenceMarginPercent))
	fs.DurationVar(&s.MemberRetryPeriod, "member-retry-period", s.MemberRetryPeriod, "Interval between member lease renewals. Must be below --member-renew-deadline.")
	fs.Float64Var(&s.RingLoadBound, "ring-load-bound", s.RingLoadBound, "Bounded-load factor of the hash ring (>= 1): no replica holds more than this times the mean number of partitions, rounded up.")
	fs.IntVar(&s.ReplicationFactor, "ring-replication-factor", s.ReplicationFactor, "Points per replica on the hash ring.")
	fs.StringVar(&s.LeaveMode, "leave-mode", s.LeaveMode, "What a graceful stop does with this replica's shoots: return (keep them reserved for --return-grace, for a restart), handover (give them to the others at once), or auto (return during a StatefulSet rolling update, handover on a scale-down or when it cannot tell).")
	fs.DurationVar(&s.ReturnGrace, "return-grace", s.ReturnGrace, "How long the others keep the shoots of a replica that stopped to restart reserved for it before they take them over (at most "+MaxReturnGrace.String()+").")
}

// FenceMargin is the least time a lease of the given duration must leave between the renew deadline,
// when a holder that cannot renew stops all work, and the moment another process may take its work
// over: the larger of MinFenceMargin and MinFenceMarginPercent of the duration. Member leases must
// keep it, and a leader (leader mode) keeps it too.
func FenceMargin(leaseDuration time.Duration) time.Duration {
	return max(MinFenceMargin, leaseDuration*MinFenceMarginPercent/100)
}

// MemberLeaseName is the name of the member lease of this replica.
func (s *Sharding) MemberLeaseName() string {
	return s.GroupName + "-member-" + s.MemberName
}

// Validate reports every problem with the settings, each under the name of its flag.
func (s *Sharding) Validate() field.ErrorList {
	errs := requireValidName(s.GroupName, validation.IsDNS1123Label, field.NewPath("--shard-group"))
	errs = append(errs, requireValidName(s.Namespace, validation.IsDNS1123Label, field.NewPath("--shard-namespace"))...)
	errs = append(errs, requireValidName(s.MemberName, validation.IsDNS1123Subdomain, field.NewPath("--member-name"))...)
	if len(errs) == 0 {
		for _, msg := range validation.IsDNS1123Subdomain(s.MemberLeaseName()) {
			errs = append(errs, field.Invalid(field.NewPath("--member-name"), s.MemberName, "member lease name "+s.MemberLeaseName()+": "+msg))
		}
	}
	if s.PartitionCount < 1 || s.PartitionCount > MaxPartitionCount {
		errs = append(errs, field.Invalid(field.NewPath("--partitions"), s.PartitionCount,
			fmt.Sprintf("must be between 1 and %d", MaxPartitionCount)))
	}
	errs = append(errs, s.validateTimings()...)
	errs = append(errs, s.validatePartitionFunction()...)
	if math.IsNaN(s.RingLoadBound) || math.IsInf(s.RingLoadBound, 0) || s.RingLoadBound < 1 {
		errs = append(errs, field.Invalid(field.NewPath("--ring-load-bound"), s.RingLoadBound,
			"must be a finite number of at least 1, or the ring may have no room for a partition"))
	}
	if s.ReplicationFactor < 1 || s.ReplicationFactor > MaxReplicationFactor {
		errs = append(errs, field.Invalid(field.NewPath("--ring-replication-factor"), s.ReplicationFactor,
			fmt.Sprintf("must be between 1 and %d", MaxReplicationFactor)))
	}
	if len(s.LeaderLeases) > 0 {
		// Empty would watch every namespace, which the group's RBAC does not allow.
		errs = append(errs, requireValidName(s.LeaderNamespace, validation.IsDNS1123Label, field.NewPath("--leader-election-namespace"))...)
	}
	return append(errs, s.validateLeave()...)
}

// validatePartitionFunction checks the partition function and what the caches may select with it.
func (s *Sharding) validatePartitionFunction() field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(PartitionFunctions, s.PartitionFunction) {
		errs = append(errs, field.NotSupported(field.NewPath("--partition-function"), s.PartitionFunction, PartitionFunctions))
	}
	switch {
	case !slices.Contains(CacheShardings, s.CacheSharding):
		errs = append(errs, field.NotSupported(field.NewPath("--cache-sharding"), s.CacheSharding, CacheShardings))
	case s.CacheSharding == CacheShardingServer && s.PartitionFunction == PartitionXXHashMod:
		errs = append(errs, field.Invalid(field.NewPath("--cache-sharding"), s.CacheSharding,
			"the API server selects ranges of the FNV-1a hash of the namespace: needs --partition-function="+PartitionFNVRange))
	}
	return errs
}

// validateLeave checks what a graceful stop does with this member's share.
func (s *Sharding) validateLeave() field.ErrorList {
	var errs field.ErrorList
	if modes := []string{LeaveAuto, LeaveReturn, LeaveHandover}; !slices.Contains(modes, s.LeaveMode) {
		errs = append(errs, field.NotSupported(field.NewPath("--leave-mode"), s.LeaveMode, modes))
	}
	if s.ReturnGrace <= 0 || s.ReturnGrace > MaxReturnGrace {
		errs = append(errs, field.Invalid(field.NewPath("--return-grace"), s.ReturnGrace.String(),
			"must be positive and at most "+MaxReturnGrace.String()+", or a replica that does not come back leaves its shoots unwatched that long"))
	}
	return errs
}

func (s *Sharding) validateTimings() field.ErrorList {
	var errs field.ErrorList
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"--member-lease-duration", s.MemberLeaseDuration},
		{"--member-renew-deadline", s.MemberRenewDeadline},
		{"--member-retry-period", s.MemberRetryPeriod},
	} {
		if d.value <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(d.flag), d.value.String(), "must be positive"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if margin := FenceMargin(s.MemberLeaseDuration); s.MemberLeaseDuration-s.MemberRenewDeadline < margin {
		errs = append(errs, field.Invalid(field.NewPath("--member-renew-deadline"), s.MemberRenewDeadline.String(), fmt.Sprintf(
			"must be at most --member-lease-duration (%s) minus %s (the larger of %s and %d%% of it): the margin covers stopping all work "+
				"after a fence, timer latency and clock-rate drift before another replica may take the shoots over, or two replicas may act on one shoot",
			s.MemberLeaseDuration, margin, MinFenceMargin, MinFenceMarginPercent)))
	}
	if s.MemberRetryPeriod >= s.MemberRenewDeadline {
		errs = append(errs, field.Invalid(field.NewPath("--member-retry-period"), s.MemberRetryPeriod.String(),
			"must be below --member-renew-deadline ("+s.MemberRenewDeadline.String()+"), or one slow renewal fences the replica"))
	}
	return errs
}
