package leases

import (
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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
