package sharding

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
)

func TestTheInitialShareIsTheRingsAndWhatIsKeptForTheMember(t *testing.T) {
	ring := RingConfig{PartitionCount: reportTestPartitions, ReplicationFactor: 400, LoadBound: 1.02}
	list := []coordinationv1.Lease{
		reportMemberLease("a", time.Second),
		reportMemberLease("gone", time.Minute),                               // expired
		reportMemberLease("left", time.Second, reportLeftLease(0)),           // left for good
		reportMemberLease("me", 2*time.Second, reportLeftLease(time.Minute)), // restarting
		reportReservedLease(0, "me"),
		reportPartitionLease(1, "a", reportTestPartitions),
	}
	got := InitialShare("g", "me", ring, list, reportNow)
	r, err := NewRing([]string{"a", "me"}, ring)
	assert.NoError(t, err)
	want := make([]bool, reportTestPartitions)
	for _, p := range r.PartitionsOf("me") {
		want[p] = true
	}
	want[0] = true // reserved for it
	assert.Equal(t, want, got, "the ring of a and me, and what is reserved for me")
	assert.Nil(t, InitialShare("g", "me", RingConfig{}, list, reportNow), "an invalid ring")
}
