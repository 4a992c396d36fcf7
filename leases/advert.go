package leases

import (
	"maps"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Advert is what a member lease tells the other members of the group, read by AdvertOf.
type Advert struct {
	// Held is true when the lease names its member as holder.
	Held bool
	// Left is true when the incarnation that wrote the lease last stopped all its work and left the
	// group (the clean-leave marker); with Returning above zero it stopped to restart.
	Left bool
	// Returning is how long the others keep a member that stopped to restart in the ring.
	Returning time.Duration
	// StateLost is true when a leaving member could not hand over the state of some partitions.
	StateLost bool
	// Duration is the lease duration the holder advertises; zero when it advertises none.
	Duration time.Duration
	// Settings are the group settings the holder runs with (SettingsAnnotation); "" when unknown.
	Settings string
	// RecentFences is how often the holder fenced within the flap window when it last renewed
	// (RecentFencesAnnotation); 0 when it advertises none.
	RecentFences int
	// Leaving is true when the incarnation that wrote the lease last announced that it is about to
	// hand its share over (LeavingAnnotation).
	Leaving bool
}

// AdvertOf reads the member lease l of member.
func AdvertOf(member string, l *coordinationv1.Lease) Advert {
	a := Advert{Held: Holder(l) == member, Settings: l.Annotations[SettingsAnnotation]}
	a.RecentFences, _ = strconv.Atoi(l.Annotations[RecentFencesAnnotation])
	a.Leaving = l.Annotations[LeavingAnnotation] != "" && l.Annotations[LeavingAnnotation] == Incarnation(l)
	if l.Spec.LeaseDurationSeconds != nil {
		a.Duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if left := l.Annotations[LeftAnnotation]; left != "" && left == Incarnation(l) {
		a.Left = true
		a.StateLost = l.Annotations[StateLostAnnotation] == "true"
		if d, err := time.ParseDuration(l.Annotations[ReturningAnnotation]); err == nil && d > 0 {
			a.Returning = d
		}
	}
	return a
}

// leaseSeconds is a duration in whole seconds, rounded up, as Lease.spec.leaseDurationSeconds holds it:
// rounding down would make the others wait less than this member relies on.
func leaseSeconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}

// OnlyRenewed reports whether after differs from before only in what a steady renewal writes: its
// renewTime (and the server's resourceVersion and managedFields). Everything a member tells the others
// (holder, duration, settings, fences, leaving and leave markers, incarnation) is the same, so the
// change says nothing but that the holder is still there.
func OnlyRenewed(before, after *coordinationv1.Lease) bool {
	if before == nil || after == nil || before.Name != after.Name || before.Namespace != after.Namespace ||
		before.UID != after.UID || before.DeletionTimestamp != nil || after.DeletionTimestamp != nil {
		return false
	}
	if !maps.Equal(before.Labels, after.Labels) || !maps.Equal(before.Annotations, after.Annotations) {
		return false
	}
	b, a := before.Spec, after.Spec
	b.RenewTime, a.RenewTime = nil, nil
	return apiequality.Semantic.DeepEqual(b, a)
}
