package leases

import (
	"context"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Acquire makes me the holder of partition p by compare-and-swap: it updates cached, the copy of the
// partition lease this member has seen, and fails with a Conflict error when the stored lease has
// changed since; with cached nil it creates the lease and fails with AlreadyExists when another member
// was first. It records incarnation so that only this process counts the write as its own.
//
// The caller may start the partition's work only after Acquire returned without error.
// The lease carries the partition count (PartitionsLabel).
func Acquire(ctx context.Context, store Store, group string, count, p int, cached *coordinationv1.Lease, me, incarnation string, now time.Time) (*coordinationv1.Lease, error) {
	if cached == nil {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: PartitionLeaseName(group, p)}}
		setPartitionHolder(lease, group, count, me, incarnation, now)
		return store.Create(ctx, lease)
	}
	lease := cached.DeepCopy()
	setPartitionHolder(lease, group, count, me, incarnation, now)
	return store.Update(ctx, lease)
}

func setPartitionHolder(lease *coordinationv1.Lease, group string, count int, me, incarnation string, now time.Time) {
	setHolder(lease, me, incarnation, now)
	lease.Labels = labels(group, KindPartition)
	lease.Labels[PartitionsLabel] = strconv.Itoa(count)
	delete(lease.Annotations, ReservedForAnnotation)
}

// PartitionCount returns the partition count a partition lease was written under, and false when it
// carries none.
func PartitionCount(l *coordinationv1.Lease) (int, bool) {
	count, err := strconv.Atoi(l.Labels[PartitionsLabel])
	return count, err == nil
}

// ReservedFor returns the member a released partition is reserved for while it restarts, or "".
func ReservedFor(l *coordinationv1.Lease) string {
	if l == nil || Holder(l) != "" {
		return ""
	}
	return l.Annotations[ReservedForAnnotation]
}

// Release clears the holder of a partition lease by compare-and-swap on cached, the copy this member
// holds, and writes handover, the state of the partition's work for the next holder (annotations
// with HandoverAnnotationPrefix). With reservedFor set, nobody but that member takes the partition
// while that member's lease is live. The caller must have stopped the partition's work before.
func Release(ctx context.Context, store Store, cached *coordinationv1.Lease, handover map[string]string, reservedFor string, now time.Time) (*coordinationv1.Lease, error) {
	lease := cached.DeepCopy()
	if reservedFor != "" {
		setAnnotation(lease, ReservedForAnnotation, reservedFor)
	}
	lease.Spec.HolderIdentity = nil
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	delete(lease.Annotations, IncarnationAnnotation)
	setAnnotation(lease, ReleasedAtAnnotation, now.UTC().Format(time.RFC3339Nano))
	for k, v := range handover {
		setAnnotation(lease, k, v)
	}
	return store.Update(ctx, lease)
}

// ReleaseVanished marks partition p's lease released with its state lost, after someone deleted it
// (cached nil: it creates it) or cleared its holder while this member held it and the work has
// stopped: the others then take the partition at once, as after a crash, instead of waiting for this
// member to expire.
func ReleaseVanished(ctx context.Context, store Store, group string, count, p int, cached *coordinationv1.Lease, now time.Time) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: PartitionLeaseName(group, p)}}
	if cached != nil {
		lease = cached.DeepCopy()
	}
	lease.Labels = labels(group, KindPartition)
	lease.Labels[PartitionsLabel] = strconv.Itoa(count)
	lease.Spec.HolderIdentity = nil
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	delete(lease.Annotations, IncarnationAnnotation)
	setAnnotation(lease, ReleasedAtAnnotation, now.UTC().Format(time.RFC3339Nano))
	setAnnotation(lease, StateLostAnnotation, "true")
	if cached == nil {
		return store.Create(ctx, lease)
	}
	return store.Update(ctx, lease)
}

// StateLost reports whether a released partition lease says the state of its work was lost.
func StateLost(l *coordinationv1.Lease) bool {
	return l != nil && l.Annotations[StateLostAnnotation] == "true"
}

// Handover returns the handover annotations of a partition lease.
func Handover(l *coordinationv1.Lease) map[string]string {
	var state map[string]string
	for k, v := range l.Annotations {
		if strings.HasPrefix(k, HandoverAnnotationPrefix) {
			if state == nil {
				state = map[string]string{}
			}
			state[k] = v
		}
	}
	return state
}

// ReleasedAt returns when the last holder released the partition, if it recorded it.
func ReleasedAt(l *coordinationv1.Lease) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, l.Annotations[ReleasedAtAnnotation])
	return t, err == nil
}

// Incarnation returns the incarnation recorded by the holder's last write; "" for no lease.
func Incarnation(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return l.Annotations[IncarnationAnnotation]
}

// setHolder writes holder, incarnation and times into lease, counting a change of holder.
func setHolder(lease *coordinationv1.Lease, holder, incarnation string, now time.Time) {
	t := metav1.NewMicroTime(now)
	if Holder(lease) != holder {
		lease.Spec.AcquireTime = &t
		if lease.Spec.LeaseTransitions == nil {
			lease.Spec.LeaseTransitions = ptr.To[int32](0)
		} else if Holder(lease) != "" {
			lease.Spec.LeaseTransitions = ptr.To(*lease.Spec.LeaseTransitions + 1)
		}
	}
	lease.Spec.HolderIdentity = ptr.To(holder)
	lease.Spec.RenewTime = &t
	setAnnotation(lease, IncarnationAnnotation, incarnation)
	delete(lease.Annotations, ReleasedAtAnnotation)
	delete(lease.Annotations, StateLostAnnotation)
	for k := range Handover(lease) {
		delete(lease.Annotations, k)
	}
}

func setAnnotation(lease *coordinationv1.Lease, key, value string) {
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[key] = value
}
