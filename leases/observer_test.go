package leases

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// memberLease builds member a's lease at resourceVersion rv; edits change it further.
func memberLease(rv int, edits ...func(*coordinationv1.Lease)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "g-member-a", ResourceVersion: strconv.Itoa(rv),
		Annotations: map[string]string{IncarnationAnnotation: "inc"}}}
	l.Spec.HolderIdentity = ptr.To("a")
	for _, edit := range edits {
		edit(l)
	}
	return l
}

func advertising(d time.Duration) func(*coordinationv1.Lease) {
	return func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To(leaseSeconds(d)) }
}

func left(returning time.Duration) func(*coordinationv1.Lease) {
	return func(l *coordinationv1.Lease) {
		l.Annotations[LeftAnnotation] = "inc"
		if returning > 0 {
			l.Annotations[ReturningAnnotation] = returning.String()
		} else {
			l.Spec.HolderIdentity = nil
		}
	}
}

func TestObserverJudgesByItsOwnClock(t *testing.T) {
	const d = 15 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		observe func(o *Observer)
		at      time.Duration
		live    bool
	}{
		{"first seen counts as live for a full duration", func(o *Observer) { o.Observe("a", memberLease(1), t0) }, d - time.Nanosecond, true},
		{"expires exactly one duration after the change was seen", func(o *Observer) { o.Observe("a", memberLease(1), t0) }, d, false},
		{"an unchanged version does not renew", func(o *Observer) {
			o.Observe("a", memberLease(1), t0)
			o.Observe("a", memberLease(1), t0.Add(10*time.Second))
		}, d, false},
		{"a new version renews from when it was seen", func(o *Observer) {
			o.Observe("a", memberLease(1), t0)
			o.Observe("a", memberLease(2), t0.Add(10*time.Second))
		}, d + 5*time.Second, true},
		{"the holder's longer advertised duration counts", func(o *Observer) {
			o.Observe("a", memberLease(1, advertising(30*time.Second)), t0)
		}, 20 * time.Second, true},
		{"a shorter advertised duration does not shorten the own", func(o *Observer) {
			o.Observe("a", memberLease(1, advertising(5*time.Second)), t0)
		}, 10 * time.Second, true},
		{"a clean leave is not live at once", func(o *Observer) {
			o.Observe("a", memberLease(1), t0)
			o.Observe("a", memberLease(2, left(0)), t0.Add(time.Second))
		}, time.Second, false},
		{"a holder cleared by someone else is a change, not a leave", func(o *Observer) {
			o.Observe("a", memberLease(1), t0)
			o.Observe("a", memberLease(2, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }), t0.Add(time.Second))
		}, d, true},
		{"a returning member stays for its grace", func(o *Observer) {
			o.Observe("a", memberLease(2, left(30*time.Second)), t0)
		}, 29 * time.Second, true},
		{"a returning member is dropped after its grace", func(o *Observer) {
			o.Observe("a", memberLease(2, left(30*time.Second)), t0)
		}, 30 * time.Second, false},
		{"a clean-leave marker of another incarnation proves nothing", func(o *Observer) {
			o.Observe("a", memberLease(2, left(0), func(l *coordinationv1.Lease) { l.Annotations[IncarnationAnnotation] = "next" }), t0)
		}, time.Second, true},
		{"a vanished lease keeps its last change", func(o *Observer) {
			o.Observe("a", memberLease(1), t0)
			o.ObserveAbsent("a", t0.Add(10*time.Second))
		}, d, false},
		{"a holder never seen counts as live for a full duration", func(o *Observer) { o.ObserveAbsent("a", t0) }, d - time.Second, true},
		{"silence while this member was cut off does not count", func(o *Observer) {
			o.Observe("a", memberLease(1), t0)
			o.Defer(t0.Add(5*time.Second), t0.Add(60*time.Second))
		}, 70 * time.Second, true},
		{"a member expired before the outage stays expired", func(o *Observer) {
			o.Observe("a", memberLease(1), t0)
			o.Defer(t0.Add(20*time.Second), t0.Add(60*time.Second))
		}, 61 * time.Second, false},
		{"an unknown member is not live", func(*Observer) {}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewObserver(d)
			tt.observe(o)
			assert.Equal(t, tt.live, o.Live("a", t0.Add(tt.at)))
		})
	}
}

func TestObserverOrphaned(t *testing.T) {
	const d = 15 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := NewObserver(d)
	o.Observe("a", memberLease(1), t0)
	assert.False(t, o.Orphaned("a", t0.Add(d)), "expired is not yet orphaned")
	assert.False(t, o.Orphaned("a", t0.Add(OrphanedAfter*d-time.Second)))
	assert.True(t, o.Orphaned("a", t0.Add(OrphanedAfter*d)), "unchanged for ten durations")
	o.Observe("a", memberLease(2, left(0)), t0)
	assert.False(t, o.Orphaned("a", t0.Add(d-time.Second)), "a clean leave is kept until every member has seen it or expired the member")
	assert.True(t, o.Orphaned("a", t0.Add(d)), "a member that left for good")
	o.Observe("a", memberLease(3, left(30*time.Second)), t0)
	assert.False(t, o.Orphaned("a", t0.Add(31*time.Second)), "a returning member is kept for ten of its graces")
	o.ObserveAbsent("a", t0.Add(time.Hour))
	assert.False(t, o.Orphaned("a", t0.Add(time.Hour)), "nothing to delete once the lease is gone")
	assert.Equal(t, time.Minute, o.AbsentFor("a", t0.Add(time.Hour+time.Minute)))
	o.Observe("a", memberLease(4), t0.Add(2*time.Hour))
	assert.Zero(t, o.AbsentFor("a", t0.Add(2*time.Hour)), "present again")
}

func TestObserverNextExpiryAndUnchanged(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := NewObserver(15 * time.Second)
	_, ok := o.NextExpiry(t0)
	assert.False(t, ok)

	o.Observe("a", memberLease(1), t0)
	o.Observe("b", memberLease(7), t0.Add(4*time.Second))
	o.Observe("c", memberLease(3, left(0)), t0)
	next, ok := o.NextExpiry(t0.Add(5 * time.Second))
	assert.True(t, ok)
	assert.Equal(t, 10*time.Second, next, "a expires first")
	assert.Equal(t, []string{"a", "b"}, o.LiveMembers(t0.Add(5*time.Second)))
	assert.Equal(t, []string{"b"}, o.LiveMembers(t0.Add(15*time.Second)))

	assert.True(t, o.Unchanged("a", "1"))
	assert.False(t, o.Unchanged("a", "2"), "a fresh read with another version proves a renewal")
	assert.False(t, o.Unchanged("z", ""), "a member never observed is never confirmed expired")
	since, advert, ok := o.Seen("b")
	assert.True(t, ok)
	assert.False(t, advert.Left)
	assert.Equal(t, t0.Add(4*time.Second), since)
	_, advert, _ = o.Seen("c")
	assert.True(t, advert.Left)
	o.Forget("b")
	assert.Equal(t, []string{"a", "c"}, o.Members())
}
