package leases

import (
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Labels and annotations on the group's Leases.
const (
	// GroupLabel carries the group name on every Lease of the group; caches select on it.
	GroupLabel = "dwd.gardener.cloud/group"
	// KindLabel says whether a Lease is a member or a partition lease.
	KindLabel = "dwd.gardener.cloud/lease-kind"
	// IncarnationAnnotation records the process incarnation of the holder's last write, so that a
	// restarted process never mistakes its predecessor's write for its own.
	IncarnationAnnotation = "dwd.gardener.cloud/incarnation"
	// ReleasedAtAnnotation records when the last holder released a partition (RFC 3339, holder's clock).
	ReleasedAtAnnotation = "dwd.gardener.cloud/released-at"
	// HandoverAnnotationPrefix prefixes the annotations in which a releasing holder hands the state of
	// its partition's work to the next; the next holder's acquire removes them.
	HandoverAnnotationPrefix = "dwd.gardener.cloud/handover-"
	// ReservedForAnnotation names the member a partition was released for while it restarts: nobody
	// else takes the partition while that member's lease is live.
	ReservedForAnnotation = "dwd.gardener.cloud/reserved-for"
	// PartitionsLabel carries the partition count on every partition lease: a lease name stands for
	// one set of namespaces only under one count.
	PartitionsLabel = "dwd.gardener.cloud/partitions"

	// SettingsAnnotation carries, on a member lease, the settings every member of the group must
	// share (Settings); a member never shares a ring with one that advertises others.
	SettingsAnnotation = "dwd.gardener.cloud/settings"
	// LeftAnnotation is the clean-leave marker on a member lease: the incarnation that wrote it had
	// stopped all its work before. Its successor under the same name may take the lease at once.
	LeftAnnotation = "dwd.gardener.cloud/left"
	// ReturningAnnotation, next to LeftAnnotation, says the member stopped to restart: the others keep
	// it in the ring, and its partitions reserved, until its lease has been unchanged for this long
	// (a Go duration).
	ReturningAnnotation = "dwd.gardener.cloud/returning"
	// StateLostAnnotation, next to LeftAnnotation, says the leaving member could not hand over the
	// state of some partitions it leaves named after it: their next holders start them as after a crash.
	// On a released partition lease (ReleaseVanished) it says the same of that partition.
	StateLostAnnotation = "dwd.gardener.cloud/state-lost"
	// PodUIDAnnotation records the Pod of the process that holds a member lease: a later container of
	// the same Pod starts only after the earlier one exited, so it may take the lease at once.
	PodUIDAnnotation = "dwd.gardener.cloud/pod-uid"
	// RecentFencesAnnotation on a member lease is how often its holder fenced within the flap window
	// (FlapWindowDurations lease durations) when it last renewed: the others step down for fencing too
	// often only while a member that does not fence could take their share over.
	RecentFencesAnnotation = "dwd.gardener.cloud/recent-fences"
	// LeavingAnnotation on a member lease names the incarnation that is about to leave and hand its
	// share over: the others list the partitions they will take from it while it still works on them
	// (Member.AnnounceLeave).
	LeavingAnnotation = "dwd.gardener.cloud/leaving"
	// CrashesAnnotation on a member lease counts the processes under its name in a row that ended
	// without a leave, each after holding the lease for less than CrashResetDurations lease
	// durations: from CrashLoopAfter on, the next process waits before it joins (Member.take).
	CrashesAnnotation = "dwd.gardener.cloud/crashes"
)

// Values of KindLabel.
const (
	KindMember    = "member"
	KindPartition = "partition"
)

// MemberLeaseName is the name of the member lease of member in group.
func MemberLeaseName(group, member string) string {
	return group + "-member-" + member
}

// PartitionLeaseName is the name of the lease of partition p in group.
func PartitionLeaseName(group string, p int) string {
	return group + "-partition-" + strconv.Itoa(p)
}

// MemberOf returns the member a member lease belongs to, from its name; ok is false for any other
// Lease.
func MemberOf(group string, l *coordinationv1.Lease) (member string, ok bool) {
	if l.Labels[KindLabel] != KindMember {
		return "", false
	}
	member, ok = strings.CutPrefix(l.Name, group+"-member-")
	return member, ok && member != ""
}

// PartitionOf returns the partition a partition lease stands for, from its name; ok is false for any
// other Lease and for a partition outside [0, count).
func PartitionOf(group string, count int, l *coordinationv1.Lease) (p int, ok bool) {
	if l.Labels[KindLabel] != KindPartition {
		return 0, false
	}
	suffix, ok := strings.CutPrefix(l.Name, group+"-partition-")
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(suffix)
	if err != nil || p < 0 || p >= count || strconv.Itoa(p) != suffix {
		return 0, false
	}
	return p, true
}

// Holder returns the holder identity of l, or "" when nobody holds it.
func Holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// labels returns the labels of a Lease of the given kind in group.
func labels(group, kind string) map[string]string {
	return map[string]string{GroupLabel: group, KindLabel: kind}
}
