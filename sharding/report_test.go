package sharding

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// The unit tests' group has 4 partitions, so that a case lists every partition lease.
const reportTestPartitions = 4

var (
	reportNow      = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	reportSettings = Settings(RingConfig{PartitionCount: reportTestPartitions, ReplicationFactor: 400, LoadBound: 1.02},
		[]string{"prober", "weeder"})
	reportOtherSettings = Settings(RingConfig{PartitionCount: 8, ReplicationFactor: 400, LoadBound: 1.02},
		[]string{"prober", "weeder"})
)

// reportMemberLease is the member lease of name in group "g", renewed ago before reportNow with a 15 s
// duration and reportSettings, changed by opts.
func reportMemberLease(name string, ago time.Duration, opts ...func(*coordinationv1.Lease)) coordinationv1.Lease {
	l := coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leases.MemberLeaseName("g", name),
			Labels:      map[string]string{leases.GroupLabel: "g", leases.KindLabel: leases.KindMember},
			Annotations: map[string]string{leases.IncarnationAnnotation: "inc-" + name, leases.SettingsAnnotation: reportSettings}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(reportNow.Add(-ago)))},
	}
	for _, opt := range opts {
		opt(&l)
	}
	return l
}

// reportLeftLease marks a member lease as a clean leave; with returning > 0 the member restarts.
func reportLeftLease(returning time.Duration) func(*coordinationv1.Lease) {
	return func(l *coordinationv1.Lease) {
		l.Annotations[leases.LeftAnnotation] = leases.Incarnation(l)
		if returning > 0 {
			l.Annotations[leases.ReturningAnnotation] = returning.String()
		} else {
			l.Spec.HolderIdentity = nil
		}
	}
}

func reportWithSettings(s string) func(*coordinationv1.Lease) {
	return func(l *coordinationv1.Lease) { l.Annotations[leases.SettingsAnnotation] = s }
}

// reportPartitionLease is the lease of partition p in group "g", held by holder ("" for none), labelled
// with count partitions.
func reportPartitionLease(p int, holder string, count int) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leases.PartitionLeaseName("g", p),
		Labels: map[string]string{leases.GroupLabel: "g", leases.KindLabel: leases.KindPartition, leases.PartitionsLabel: strconv.Itoa(count)}}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// reportReservedLease is a released partition lease reserved for member.
func reportReservedLease(p int, member string) coordinationv1.Lease {
	l := reportPartitionLease(p, "", reportTestPartitions)
	l.Annotations = map[string]string{leases.ReservedForAnnotation: member}
	return l
}

// reportClusterIn returns a Cluster name in partition p of reportTestPartitions, different for each i.
func reportClusterIn(p, i int) string {
	for n := 0; ; n++ {
		name := fmt.Sprintf("shoot--p%d-%d-%d", p, i, n)
		if (Partitions{Count: reportTestPartitions}).Of(name) == p {
			return name
		}
	}
}

// reportOneClusterPerPartition has one Cluster in each of the 4 partitions.
var reportOneClusterPerPartition = []string{reportClusterIn(0, 0), reportClusterIn(1, 0), reportClusterIn(2, 0), reportClusterIn(3, 0)}

// reportMemberSummary is the part of a ReportMember the table tests compare.
type reportMemberSummary struct {
	name                     string
	state                    string
	held, reserved, shoots   int
	settingsPartitionsOrZero int
}

func summarizeReport(members []ReportMember) []reportMemberSummary {
	var out []reportMemberSummary
	for _, m := range members {
		s := reportMemberSummary{name: m.Name, state: m.State, held: m.PartitionsHeld, reserved: m.PartitionsReserved, shoots: m.Shoots}
		if m.Settings != nil {
			s.settingsPartitionsOrZero = m.Settings.Partitions
		}
		out = append(out, s)
	}
	return out
}

func TestReport(t *testing.T) {
	ab := func(bLease coordinationv1.Lease, parts ...coordinationv1.Lease) []coordinationv1.Lease {
		return append([]coordinationv1.Lease{reportMemberLease("a", time.Second), bLease}, parts...)
	}
	split := []coordinationv1.Lease{reportPartitionLease(0, "a", 4), reportPartitionLease(1, "a", 4), reportPartitionLease(2, "b", 4), reportPartitionLease(3, "b", 4)}
	tests := []struct {
		name             string
		leases           []coordinationv1.Lease
		clusters         []string
		wantMembers      []reportMemberSummary
		wantUnheld       []int
		wantShootsUnheld int
		wantPartitions   int
		wantMismatched   []string
		wantBadLeases    []string
	}{
		{
			name: "all live", leases: ab(reportMemberLease("b", 2*time.Second), split...), clusters: reportOneClusterPerPartition,
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "live", 2, 0, 2, 4}}, wantUnheld: []int{},
		},
		{
			name: "expired member", leases: ab(reportMemberLease("b", 16*time.Second), split...), clusters: reportOneClusterPerPartition,
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "expired", 2, 0, 2, 4}},
			wantUnheld:  []int{2, 3}, wantShootsUnheld: 2,
		},
		{
			name: "renewed just within its duration", leases: ab(reportMemberLease("b", 14*time.Second), split...),
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "live", 2, 0, 0, 4}}, wantUnheld: []int{},
		},
		{
			name: "member lease cleared by someone else", leases: ab(reportMemberLease("b", time.Second, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }), split...),
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "expired", 2, 0, 0, 4}}, wantUnheld: []int{2, 3},
		},
		{
			name: "left for good, partitions released", clusters: reportOneClusterPerPartition,
			leases:      ab(reportMemberLease("b", time.Second, reportLeftLease(0)), split[0], split[1], reportPartitionLease(2, "", 4), reportPartitionLease(3, "", 4)),
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "left", 0, 0, 0, 4}},
			wantUnheld:  []int{2, 3}, wantShootsUnheld: 2,
		},
		{
			name: "returning within its grace", clusters: reportOneClusterPerPartition,
			leases:      ab(reportMemberLease("b", 20*time.Second, reportLeftLease(30*time.Second)), split[0], split[1], reportReservedLease(2, "b"), reportReservedLease(3, "b")),
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "returning", 0, 2, 0, 4}},
			wantUnheld:  []int{2, 3}, wantShootsUnheld: 2,
		},
		{
			name:        "returning past its grace",
			leases:      ab(reportMemberLease("b", 31*time.Second, reportLeftLease(30*time.Second)), split[0], split[1], reportReservedLease(2, "b"), reportReservedLease(3, "b")),
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "left", 0, 2, 0, 4}}, wantUnheld: []int{2, 3},
		},
		{
			name: "a left marker of an earlier incarnation is no leave",
			leases: ab(reportMemberLease("b", time.Second, reportLeftLease(0), func(l *coordinationv1.Lease) {
				l.Spec.HolderIdentity = ptr.To("b")
				l.Annotations[leases.IncarnationAnnotation] = "inc-b-2"
			}), split...),
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "live", 2, 0, 0, 4}}, wantUnheld: []int{},
		},
		{
			name: "missing partition lease", leases: ab(reportMemberLease("b", time.Second), split[:3]...), clusters: reportOneClusterPerPartition,
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "live", 1, 0, 1, 4}},
			wantUnheld:  []int{3}, wantShootsUnheld: 1,
		},
		{
			name: "holder without a member lease", leases: ab(reportMemberLease("b", time.Second), split[0], split[1], split[2], reportPartitionLease(3, "ghost", 4)),
			clusters:    reportOneClusterPerPartition,
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "live", 1, 0, 1, 4}, {"ghost", "no-lease", 1, 0, 1, 0}},
			wantUnheld:  []int{3}, wantShootsUnheld: 1,
		},
		{
			name:        "a member with other settings",
			leases:      append(ab(reportMemberLease("b", time.Second), split...), reportMemberLease("c", time.Second, reportWithSettings(reportOtherSettings))),
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "live", 2, 0, 0, 4}, {"c", "live", 0, 0, 0, 8}},
			wantUnheld:  []int{}, wantMismatched: []string{"c"},
		},
		{
			name: "the majority of live members decides", leases: []coordinationv1.Lease{
				reportMemberLease("a", time.Second, reportWithSettings(reportOtherSettings)),
				reportMemberLease("b", 20*time.Second), reportMemberLease("c", 20*time.Second),
				reportPartitionLease(0, "a", 8), reportPartitionLease(1, "b", 4),
			},
			wantMembers: []reportMemberSummary{{"a", "live", 1, 0, 0, 8}, {"b", "expired", 0, 0, 0, 4}, {"c", "expired", 0, 0, 0, 4}},
			wantUnheld:  []int{1, 2, 3, 4, 5, 6, 7}, wantPartitions: 8, wantMismatched: []string{"b", "c"}, wantBadLeases: []string{"g-partition-1"},
		},
		{
			name: "no live member: the majority of all", leases: []coordinationv1.Lease{
				reportMemberLease("a", 20*time.Second, reportWithSettings(reportOtherSettings)),
				reportMemberLease("b", 20*time.Second), reportMemberLease("c", 20*time.Second),
			},
			wantMembers: []reportMemberSummary{{"a", "expired", 0, 0, 0, 8}, {"b", "expired", 0, 0, 0, 4}, {"c", "expired", 0, 0, 0, 4}},
			wantUnheld:  []int{0, 1, 2, 3}, wantMismatched: []string{"a"},
		},
		{
			name:        "partition lease of another count",
			leases:      ab(reportMemberLease("b", time.Second), split[0], split[1], split[2], reportPartitionLease(3, "b", 8), reportPartitionLease(7, "b", 8)),
			wantMembers: []reportMemberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "live", 1, 0, 0, 4}},
			wantUnheld:  []int{3}, wantBadLeases: []string{"g-partition-3", "g-partition-7"},
		},
		{
			name: "no settings advertised: the default count", leases: []coordinationv1.Lease{reportMemberLease("a", time.Second, reportWithSettings(""))},
			wantMembers: []reportMemberSummary{{"a", "live", 0, 0, 0, 0}}, wantPartitions: config.DefaultPartitionCount,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := BuildReport("g", tt.leases, tt.clusters, reportNow)
			assert.Equal(t, tt.wantMembers, summarizeReport(r.Members))
			if tt.wantUnheld != nil {
				assert.Equal(t, tt.wantUnheld, r.Unheld)
			}
			assert.Equal(t, len(tt.clusters), r.Shoots)
			assert.Equal(t, tt.wantShootsUnheld, r.ShootsUnheld)
			if tt.wantPartitions == 0 {
				tt.wantPartitions = reportTestPartitions
			}
			assert.Equal(t, tt.wantPartitions, r.Partitions)
			assert.Equal(t, append([]string{}, tt.wantMismatched...), r.Mismatches.Members)
			var bad []string
			for _, l := range r.Mismatches.PartitionLeases {
				bad = append(bad, l.Name)
			}
			assert.Equal(t, tt.wantBadLeases, bad)
		})
	}
}

func TestReportOfNoMembersIsEmptyNotNull(t *testing.T) {
	r := BuildReport("g", []coordinationv1.Lease{reportPartitionLease(0, "", 4)}, nil, reportNow)
	raw, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"members":[]`)
	assert.Contains(t, string(raw), `"mismatches":{"members":[],"partitionLeases":[]}`)
	assert.Equal(t, []int{0, 1, 2, 3}, r.Unheld, "no settings advertised: the count the partition leases are labelled with")
}

func TestReportParsesSettings(t *testing.T) {
	s := parseSettings(reportSettings)
	assert.Equal(t, &ReportSettings{Raw: reportSettings, Partitions: 4, ReplicationFactor: 400, LoadBound: 1.02,
		PartitionFunction: DefaultPartitionFunction, Roles: []string{"prober", "weeder"}}, s)
	assert.Nil(t, parseSettings(""))
	assert.Equal(t, &ReportSettings{Raw: "future=1,roles=", Roles: []string{}}, parseSettings("future=1,roles="),
		"unknown keys are kept in raw only")
}

func TestReportFormats(t *testing.T) {
	list := []coordinationv1.Lease{reportMemberLease("a", time.Second), reportMemberLease("b", 20*time.Second, reportLeftLease(30*time.Second)),
		reportMemberLease("c", 2*time.Second, reportWithSettings(reportOtherSettings)),
		reportPartitionLease(0, "a", 4), reportPartitionLease(1, "a", 4), reportReservedLease(2, "b"), reportPartitionLease(3, "", 4), reportPartitionLease(5, "c", 8)}
	r := BuildReport("g", list, reportOneClusterPerPartition, reportNow)
	r.Namespace = "garden"

	var table bytes.Buffer
	require.NoError(t, r.WriteTable(&table))
	for _, want := range []string{
		"Group g in namespace garden, 4 partitions",
		"MEMBER  STATE",
		"a       live       1s ago   15s                  2           0         2       P=4 RF=400 LB=1.02 fn=fnv1a64-range-v1 roles=prober+weeder",
		"b       returning  20s ago  15s (returning 30s)  0           1         0",
		"c       live       2s ago   15s                  0           0         0       P=8 RF=400",
		"Shoots: 4, 2 of them in partitions without a live holder",
		"Partitions without a live holder: 2 (2, 3)",
		"Members with other settings: c",
		`Partition leases of another partition count: g-partition-5 (partitions="8", holder "c")`,
	} {
		assert.Contains(t, table.String(), want)
	}

	var decoded map[string]any
	raw, err := json.Marshal(r)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &decoded))
	for _, key := range []string{"group", "namespace", "time", "partitions", "settings", "members", "shoots", "shootsUnheld", "unheldPartitions", "mismatches"} {
		assert.Contains(t, decoded, key, "the JSON field names are documented in the help")
	}
	member := decoded["members"].([]any)[1].(map[string]any)
	for _, key := range []string{"name", "state", "renewTime", "leaseDurationSeconds", "returningSeconds", "settings", "partitionsHeld", "partitionsReserved", "shoots"} {
		assert.Contains(t, member, key)
	}
	assert.Equal(t, "returning", member["state"])
}
