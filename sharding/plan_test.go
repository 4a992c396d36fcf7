package sharding

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlan(t *testing.T) {
	live := func(m string) bool { return m == "b" || m == "r" }
	returning := func(m string) bool { return m == "r" }
	tests := []struct {
		name  string
		state PartitionState
		want  Action
	}{
		{"working here and wanted here: keep", PartitionState{Holder: "me", Active: true, Desired: "me"}, Keep},
		{"working here, wanted elsewhere: release", PartitionState{Holder: "me", Active: true, Desired: "b"}, Release},
		{"working here while the cache lags: release by the ring, not the cache", PartitionState{Holder: "", Active: true, Desired: "b"}, Release},
		{"free and wanted here: acquire", PartitionState{Holder: "", Desired: "me"}, Acquire},
		{"names me after a restart, wanted here: confirm by a fresh write", PartitionState{Holder: "me", Desired: "me"}, Acquire},
		{"names me after a restart, wanted elsewhere: release", PartitionState{Holder: "me", Desired: "b"}, Release},
		{"held by a live member, wanted here: wait", PartitionState{Holder: "b", Desired: "me"}, Keep},
		{"held by an expired member, wanted here: acquire", PartitionState{Holder: "c", Desired: "me"}, Acquire},
		{"held by an expired member, wanted elsewhere: leave it", PartitionState{Holder: "c", Desired: "b"}, Keep},
		{"free, wanted elsewhere: leave it", PartitionState{Holder: "", Desired: "b"}, Keep},
		{"held by another, wanted by a third: leave it", PartitionState{Holder: "b", Desired: "c"}, Keep},
		{"reserved for a member restarting, wanted here: leave it", PartitionState{Desired: "me", ReservedFor: "r"}, Keep},
		{"reserved for a member back and running, wanted here: acquire", PartitionState{Desired: "me", ReservedFor: "b"}, Acquire},
		{"reserved for a member whose grace ended, wanted here: acquire", PartitionState{Desired: "me", ReservedFor: "gone"}, Acquire},
		{"reserved for me, wanted here: acquire", PartitionState{Desired: "me", ReservedFor: "me"}, Acquire},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Plan("me", tt.state, live, returning))
		})
	}
}
