package sharding

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// The sharding metrics, each labelled with group and member so that a dashboard shows every shard.
var (
	partitionsHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_partitions_held", Help: "Partitions whose work runs on this member.",
	}, []string{"group", "member"})
	shootsOwned = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_shoots_owned", Help: "Shoot namespaces in the partitions this member holds.",
	}, []string{"group", "member"})
	liveMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_live_members", Help: "Members this member currently sees live, itself included.",
	}, []string{"group", "member"})
	rebalances = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_rebalances_total", Help: "Changes of the live member set this member has seen.",
	}, []string{"group", "member"})
	handoverSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dwd_sharding_handover_duration_seconds",
		Help:    "Time from a partition's release (cause=release) or its holder's last observed renewal (cause=expiry) until this member acquired it.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 60},
	}, []string{"group", "member", "cause"})
	partitionWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_partition_lease_writes_total", Help: "Partition lease writes by operation and result.",
	}, []string{"group", "member", "operation", "result"})
	renewFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_lease_renew_failures_total", Help: "Failed renewals of this member's lease.",
	}, []string{"group", "member"})
	selfFencings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_self_fencing_total", Help: "Times this member stopped all work because its lease was not renewed in time.",
	}, []string{"group", "member"})
	settingsMismatch = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_settings_mismatch",
		Help: "Live members advertising other group settings than this member's, plus one when partition leases are held under another partition count; above zero this member changes nothing it holds.",
	}, []string{"group", "member"})
	foreignMembersLive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_foreign_members",
		Help: "Live members of other groups in the shard namespace that run a role of this member's and were there first, plus live leader leases of the original's mode for its roles; above zero this member holds no partition.",
	}, []string{"group", "member"})
	viewStale = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_view_stale", Help: "1 while this member's Lease cache has missed its own renewals, so that it makes no ring changes.",
	}, []string{"group", "member"})
	foreignWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_foreign_writes_total", Help: "Held partition leases found changed or deleted by someone else; the work of each stopped at once.",
	}, []string{"group", "member"})
	orphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_orphaned_leases_deleted_total", Help: "Member leases of members gone for good that this member deleted.",
	}, []string{"group", "member"})
	fenceSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dwd_sharding_fence_duration_seconds",
		Help:    "Time to stop the work of every partition after a fence or at a leave.",
		Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 2.5, 5, 10},
	}, []string{"group", "member"})
	fenceOverruns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_fence_overruns_total", Help: "Fences whose stop took longer than the margin the lease timings leave; the process exits.",
	}, []string{"group", "member"})
	stepDowns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_step_downs_total", Help: "Times this member gave up its lease after fencing too often (a flapping renewal).",
	}, []string{"group", "member"})
	partitions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_partitions", Help: "The partition count this member is configured with; the partitions held by the members of a group sum to it.",
	}, []string{"group", "member"})
	settingsInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_settings_info",
		Help: "Always 1, labelled with the group settings this member advertises in its member lease; members of a group whose labels differ do not agree.",
	}, []string{"group", "member", "partitions", "replication_factor", "load_bound", "partition_function", "roles"})
	partitionsUnheld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_partitions_unheld", Help: "Partitions whose lease names no live member, as this member's Lease cache shows them at its last reconcile.",
	}, []string{"group", "member"})
	lastRenew = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_member_lease_last_renew_timestamp_seconds", Help: "Unix time of the last successful renewal of this member's lease.",
	}, []string{"group", "member"})
	partitionsWarming = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dwd_sharding_partitions_warming",
		Help: "Partitions this member would acquire but waits for: the replica's caches do not hold their shoots yet (--cache-sharding).",
	}, []string{"group", "member"})
	coldAcquisitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_cold_acquisitions_total",
		Help: "Partitions acquired although the replica's caches did not hold their shoots after the longest wait (MaxWarmWait, 15 s).",
	}, []string{"group", "member"})
	reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_reconciles_total",
		Help: "Reconciles of the group's partitions this member ran: on every Lease change but a steady renewal of a member or leader lease, at the next moment a member (or, while deferring, an incumbent) can expire or go silent, and at least every retry period.",
	}, []string{"group", "member"})
	guardRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_sharding_write_refusals_total",
		Help: "Writes on a shoot (scale, pod delete) refused right before they were sent, because this member no longer held the shoot's partition (reason=not_owner) or was past its renew deadline (reason=fenced).",
	}, []string{"group", "member", "reason"})
)

// collectors are the sharding metrics, all registered by newMemberMetrics.
var collectors = []prometheus.Collector{partitionsHeld, shootsOwned, liveMembers, rebalances, handoverSeconds,
	partitionWrites, renewFailures, selfFencings, guardRefusals, settingsMismatch, foreignMembersLive, viewStale, foreignWrites,
	orphansDeleted, fenceSeconds, fenceOverruns, stepDowns, partitions, settingsInfo, partitionsUnheld, lastRenew, partitionsWarming, coldAcquisitions, reconciles}

var registerOnce sync.Once

// memberMetrics are the metrics of one member, with its labels bound.
type memberMetrics struct {
	group, member    string
	partitionsHeld   prometheus.Gauge
	unheld           prometheus.Gauge
	warming          prometheus.Gauge
	coldAcquisitions prometheus.Counter
	reconciles       prometheus.Counter
	lastRenew        prometheus.Gauge
	shootsOwned      prometheus.Gauge
	liveMembers      prometheus.Gauge
	rebalances       prometheus.Counter
	renewFailures    prometheus.Counter
	fences           prometheus.Counter
	handover         prometheus.ObserverVec
	guardRefusals    *prometheus.CounterVec
	mismatch         prometheus.Gauge
	foreignMembers   prometheus.Gauge
	viewStale        prometheus.Gauge
	foreignWrites    prometheus.Counter
	orphansDeleted   prometheus.Counter
	fenceDuration    prometheus.Observer
	fenceOverruns    prometheus.Counter
	stepDowns        prometheus.Counter
}

func newMemberMetrics(group, member string) *memberMetrics {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(collectors...)
	})
	// The labelled counters and histograms start at zero, so that a rate over them is 0 rather than no data.
	for _, reason := range []string{"not_owner", "fenced"} {
		guardRefusals.WithLabelValues(group, member, reason)
	}
	for _, cause := range []string{"release", "expiry"} {
		handoverSeconds.WithLabelValues(group, member, cause)
	}
	return &memberMetrics{
		group: group, member: member,
		partitionsHeld:   partitionsHeld.WithLabelValues(group, member),
		unheld:           partitionsUnheld.WithLabelValues(group, member),
		warming:          partitionsWarming.WithLabelValues(group, member),
		coldAcquisitions: coldAcquisitions.WithLabelValues(group, member),
		reconciles:       reconciles.WithLabelValues(group, member),
		lastRenew:        lastRenew.WithLabelValues(group, member),
		shootsOwned:      shootsOwned.WithLabelValues(group, member),
		liveMembers:      liveMembers.WithLabelValues(group, member),
		rebalances:       rebalances.WithLabelValues(group, member),
		renewFailures:    renewFailures.WithLabelValues(group, member),
		fences:           selfFencings.WithLabelValues(group, member),
		handover:         handoverSeconds.MustCurryWith(prometheus.Labels{"group": group, "member": member}),
		guardRefusals:    guardRefusals.MustCurryWith(prometheus.Labels{"group": group, "member": member}),
		mismatch:         settingsMismatch.WithLabelValues(group, member),
		foreignMembers:   foreignMembersLive.WithLabelValues(group, member),
		viewStale:        viewStale.WithLabelValues(group, member),
		foreignWrites:    foreignWrites.WithLabelValues(group, member),
		orphansDeleted:   orphansDeleted.WithLabelValues(group, member),
		fenceDuration:    fenceSeconds.WithLabelValues(group, member),
		fenceOverruns:    fenceOverruns.WithLabelValues(group, member),
		stepDowns:        stepDowns.WithLabelValues(group, member),
	}
}

// renewed records the send time of the member's (or leader's) last successful lease renewal.
func (m *memberMetrics) renewed(sent time.Time) {
	m.lastRenew.Set(float64(sent.UnixNano()) / 1e9)
}

// setSettings exports the partition count and the settings fingerprint (see Settings) this member
// advertises.
func (m *memberMetrics) setSettings(partitionCount int, settings string) {
	partitions.WithLabelValues(m.group, m.member).Set(float64(partitionCount))
	fields := settingsFields(settings)
	settingsInfo.WithLabelValues(m.group, m.member, fields["partitions"], fields["replication-factor"],
		fields["load-bound"], fields["partition-function"], fields["roles"]).Set(1)
}

// write counts a partition lease write.
func (m *memberMetrics) write(operation string, err error) {
	result := "success"
	switch {
	case err == nil:
	case isLostRace(err):
		result = "conflict"
	default:
		result = "error"
	}
	partitionWrites.WithLabelValues(m.group, m.member, operation, result).Inc()
}

// updateMetrics sets the partitions gauge.
func (c *Coordinator) updateMetrics() {
	c.metrics.partitionsHeld.Set(float64(len(c.Held())))
}

// updateUnheld sets the unheld-partitions gauge from snap: this member counts as live while it is not
// fenced (its own lease may lag in the cache), the others as the observer sees them.
func (c *Coordinator) updateUnheld(snap snapshot, now time.Time) {
	fenced := c.liveness.Fenced(now)
	live := func(m string) bool { return (m == c.cfg.Member && !fenced) || c.observer.Live(m, now) }
	c.metrics.unheld.Set(float64(unheldPartitions(snap.parts, live)))
}

// unheldPartitions counts the partitions whose lease, nil when the cache has none, names no holder
// that live reports live.
func unheldPartitions(parts []*coordinationv1.Lease, live func(member string) bool) int {
	n := 0
	for _, l := range parts {
		if h := leases.Holder(l); h == "" || !live(h) {
			n++
		}
	}
	return n
}

// shootsOwnedPeriod bounds how long the shoots-owned gauge may miss shoots added or deleted while
// the held partitions stay the same.
const shootsOwnedPeriod = 15 * time.Second

// updateShootsOwned counts the shoots in the held partitions, waiting at most a second for the cache:
// when the held partitions changed since the last count, else every shootsOwnedPeriod. Counting walks
// every shoot of the seed, too much for each Lease event.
func (c *Coordinator) updateShootsOwned(ctx context.Context, now time.Time) {
	if c.namespaces == nil {
		return
	}
	changes := c.heldChanges.Load()
	// Before the first count, counted.at is the zero time and the period has long passed.
	if changes == c.counted.changes && now.Sub(c.counted.at) < shootsOwnedPeriod {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	owned := 0
	for _, ns := range c.namespaces(ctx) {
		if c.Owns(ns) {
			owned++
		}
	}
	c.metrics.shootsOwned.Set(float64(owned))
	c.counted.changes, c.counted.at, c.counted.owned = changes, now, owned
}
