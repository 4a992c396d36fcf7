package benchmarks

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarkdownShowsTheRestartScenarios(t *testing.T) {
	r := sampleResult("latest", 490.5)
	r.Rolling = &Rolling{Shoots: 300, Replicas: 3, LeaveMode: "return", HandedOver: 12, LongestGapSeconds: 21.5, GapP50Seconds: 10.2,
		GapP99Seconds: 20.25, GapsOverLimit: 40, GapLimitSeconds: 15, RolloutSeconds: 31.4, ResumedSeconds: 40.2, ResumeTimeoutSeconds: 105, SettleSeconds: 40,
		PartitionLeaseWrites: PartitionWrites{Total: 10, Acquires: 5, Releases: 5},
		Restarts:             []RollingRestart{{Replica: "dwd-2", StopSeconds: 1.25, ReadySeconds: 3.5, Shoots: 100, LongestGapSeconds: 21.5}, {Replica: "dwd-1", StopSeconds: 30, Killed: true}}}
	r.Outage = &Outage{Shoots: 300, Replicas: 3, OutageSeconds: 60, CutAfterSeconds: 31, ResumedSeconds: 12.5, ResumedP50Seconds: 4, ResumedP99Seconds: 12,
		ResumeTimeoutSeconds: 105, ReadySeconds: 2.25, PartitionsMoved: 3, PartitionsHeldByOthers: 5,
		PartitionLeaseWritesHealed: PartitionWrites{Total: 2, Rewrites: 2}, WeederWindowsOpened: map[string]float64{"kube-apiserver": 300},
		SelfFencings: 3, Exited: []string{"dwd-0"}, SettleSeconds: 20}
	var b strings.Builder
	require.NoError(t, r.WriteMarkdown(&b, nil))
	md := b.String()
	assert.Contains(t, md, "300 shoots, 3 replicas restarted from the highest ordinal down, leave mode return. Window: the first SIGTERM until every shoot was probed by its owner's new process, and 40 s more.")
	assert.Contains(t, md, "| 12 | 21.50 | 10.20 / 20.25 | 40 | 31.4 | 40.2 | 0 (in 105 s) | 10 (0 creates, 5 acquires, 5 releases, 0 rewrites) |")
	assert.Contains(t, md, "| dwd-2 | 1.25 | 3.50 | 100 | 21.50 |")
	assert.Contains(t, md, "| dwd-1 | 30.00 (killed) | 0.00 | 0 | 0.00 |")
	assert.Contains(t, md, "300 shoots, 3 replicas cut from the seed's API server for 60 s, 31 s after their start settled, with 0 weeding windows open;")
	assert.Contains(t, md, "| 4.00 / 12.00 / 12.50 | 0 (in 105 s) | 2.25 | 0 | 3 (5) | 0 (0 creates, 0 acquires, 0 releases, 0 rewrites); 2 (0 creates, 0 acquires, 0 releases, 2 rewrites) | 300 (kube-apiserver 300) | 0; 0 | 3 | dwd-0 |")

	r.Rolling.LeaveMode = ""
	b.Reset()
	require.NoError(t, r.WriteMarkdown(&b, nil))
	assert.Contains(t, b.String(), "leave mode none (the binary has no --leave-mode).")

	path := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, r.WriteJSON(path))
	back, err := ReadResult(path)
	require.NoError(t, err)
	assert.Equal(t, r, back)
}
