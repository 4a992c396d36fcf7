package leases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestObserverJudgesByItsOwnClock(t *testing.T) {
	const d = 15 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		observe func(o *Observer)
		at      time.Duration
		live    bool
	}{
		{"first seen counts as live for a full duration", func(o *Observer) { o.Observe("a", "1", true, t0) }, d - time.Nanosecond, true},
		{"expires exactly one duration after the change was seen", func(o *Observer) { o.Observe("a", "1", true, t0) }, d, false},
		{"an unchanged version does not renew", func(o *Observer) {
			o.Observe("a", "1", true, t0)
			o.Observe("a", "1", true, t0.Add(10*time.Second))
		}, d, false},
		{"a new version renews from when it was seen", func(o *Observer) {
			o.Observe("a", "1", true, t0)
			o.Observe("a", "2", true, t0.Add(10*time.Second))
		}, d + 5*time.Second, true},
		{"a released lease is not live at once", func(o *Observer) {
			o.Observe("a", "1", true, t0)
			o.Observe("a", "2", false, t0.Add(time.Second))
		}, time.Second, false},
		{"a vanished lease keeps its last change", func(o *Observer) {
			o.Observe("a", "1", true, t0)
			o.Observe("a", "", true, t0.Add(10*time.Second))
		}, d, false},
		{"a holder never seen counts as live for a full duration", func(o *Observer) { o.Observe("a", "", true, t0) }, d - time.Second, true},
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

func TestObserverNextExpiryAndUnchanged(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := NewObserver(15 * time.Second)
	_, ok := o.NextExpiry(t0)
	assert.False(t, ok)

	o.Observe("a", "1", true, t0)
	o.Observe("b", "7", true, t0.Add(4*time.Second))
	o.Observe("c", "3", false, t0)
	next, ok := o.NextExpiry(t0.Add(5 * time.Second))
	assert.True(t, ok)
	assert.Equal(t, 10*time.Second, next, "a expires first")
	assert.Equal(t, []string{"a", "b"}, o.LiveMembers(t0.Add(5*time.Second)))
	assert.Equal(t, []string{"b"}, o.LiveMembers(t0.Add(15*time.Second)))

	assert.True(t, o.Unchanged("a", "1"))
	assert.False(t, o.Unchanged("a", "2"), "a fresh read with another version proves a renewal")
	assert.False(t, o.Unchanged("z", ""), "a member never observed is never confirmed expired")
	since, held, ok := o.Seen("b")
	assert.True(t, ok)
	assert.True(t, held)
	assert.Equal(t, t0.Add(4*time.Second), since)
	_, held, _ = o.Seen("c")
	assert.False(t, held)
	o.Forget("b")
	assert.Equal(t, []string{"a", "c"}, o.Members())
}
