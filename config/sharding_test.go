package config

import (
	"math"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validSharding() Sharding {
	s := DefaultSharding("dependency-watchdog")
	s.Namespace = "garden"
	s.MemberName = "dwd-0"
	return s
}

func TestShardingDefaultsAreValid(t *testing.T) {
	s := validSharding()
	assert.Empty(t, s.Validate())
	assert.Equal(t, Sharding{
		GroupName: "dependency-watchdog", Namespace: "garden", MemberName: "dwd-0",
		PartitionCount: DefaultPartitionCount, MemberLeaseDuration: 15 * time.Second,
		MemberRenewDeadline: 10 * time.Second, MemberRetryPeriod: 2 * time.Second,
		RingLoadBound: DefaultRingLoadBound, ReplicationFactor: DefaultReplicationFactor,
		LeaveMode: LeaveAuto, ReturnGrace: 30 * time.Second,
		PartitionFunction: PartitionFNVRange, CacheSharding: CacheShardingClient,
	}, s)
	assert.Equal(t, "dependency-watchdog-member-dwd-0", s.MemberLeaseName())
}

func TestShardingValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Sharding)
		want   []string // field paths of the expected errors
		typ    field.ErrorType
	}{
		{"empty group", func(s *Sharding) { s.GroupName = "" }, []string{"--shard-group"}, field.ErrorTypeRequired},
		{"group not a label", func(s *Sharding) { s.GroupName = "Group_1" }, []string{"--shard-group"}, field.ErrorTypeInvalid},
		{"empty namespace", func(s *Sharding) { s.Namespace = "" }, []string{"--shard-namespace"}, field.ErrorTypeRequired},
		{"bad namespace", func(s *Sharding) { s.Namespace = "a.b" }, []string{"--shard-namespace"}, field.ErrorTypeInvalid},
		{"empty member", func(s *Sharding) { s.MemberName = "" }, []string{"--member-name"}, field.ErrorTypeRequired},
		{"bad member", func(s *Sharding) { s.MemberName = "Pod_0" }, []string{"--member-name"}, field.ErrorTypeInvalid},
		{"lease name too long", func(s *Sharding) { s.MemberName = longName(240) }, []string{"--member-name"}, field.ErrorTypeInvalid},
		{"no partitions", func(s *Sharding) { s.PartitionCount = 0 }, []string{"--partitions"}, field.ErrorTypeInvalid},
		{"too many partitions", func(s *Sharding) { s.PartitionCount = MaxPartitionCount + 1 }, []string{"--partitions"}, field.ErrorTypeInvalid},
		{"zero lease duration", func(s *Sharding) { s.MemberLeaseDuration = 0 }, []string{"--member-lease-duration"}, field.ErrorTypeInvalid},
		{"negative renew deadline", func(s *Sharding) { s.MemberRenewDeadline = -time.Second }, []string{"--member-renew-deadline"}, field.ErrorTypeInvalid},
		{"zero retry period", func(s *Sharding) { s.MemberRetryPeriod = 0 }, []string{"--member-retry-period"}, field.ErrorTypeInvalid},
		{"renew deadline not below lease duration", func(s *Sharding) { s.MemberRenewDeadline = s.MemberLeaseDuration }, []string{"--member-renew-deadline"}, field.ErrorTypeInvalid},
		{"retry period not below renew deadline", func(s *Sharding) { s.MemberRetryPeriod = s.MemberRenewDeadline }, []string{"--member-retry-period"}, field.ErrorTypeInvalid},
		{"load bound below 1", func(s *Sharding) { s.RingLoadBound = 0.99 }, []string{"--ring-load-bound"}, field.ErrorTypeInvalid},
		{"load bound NaN", func(s *Sharding) { s.RingLoadBound = math.NaN() }, []string{"--ring-load-bound"}, field.ErrorTypeInvalid},
		{"load bound infinite", func(s *Sharding) { s.RingLoadBound = math.Inf(1) }, []string{"--ring-load-bound"}, field.ErrorTypeInvalid},
		{"no replication", func(s *Sharding) { s.ReplicationFactor = 0 }, []string{"--ring-replication-factor"}, field.ErrorTypeInvalid},
		{"too much replication", func(s *Sharding) { s.ReplicationFactor = MaxReplicationFactor + 1 }, []string{"--ring-replication-factor"}, field.ErrorTypeInvalid},
		{"unknown leave mode", func(s *Sharding) { s.LeaveMode = "stay" }, []string{"--leave-mode"}, field.ErrorTypeNotSupported},
		{"empty leave mode", func(s *Sharding) { s.LeaveMode = "" }, []string{"--leave-mode"}, field.ErrorTypeNotSupported},
		{"leave mode in capitals", func(s *Sharding) { s.LeaveMode = "Return" }, []string{"--leave-mode"}, field.ErrorTypeNotSupported},
		{"zero return grace", func(s *Sharding) { s.ReturnGrace = 0 }, []string{"--return-grace"}, field.ErrorTypeInvalid},
		{"negative return grace", func(s *Sharding) { s.ReturnGrace = -time.Second }, []string{"--return-grace"}, field.ErrorTypeInvalid},
		{"return grace over the bound", func(s *Sharding) { s.ReturnGrace = MaxReturnGrace + time.Nanosecond }, []string{"--return-grace"}, field.ErrorTypeInvalid},
		{"leader leases in no namespace", func(s *Sharding) { s.LeaderLeases, s.LeaderNamespace = []string{"dwd-prober-leader-election"}, "" },
			[]string{"--leader-election-namespace"}, field.ErrorTypeRequired},
		{"leader leases in a bad namespace", func(s *Sharding) {
			s.LeaderLeases, s.LeaderNamespace = []string{"dwd-prober-leader-election"}, "Garden"
		},
			[]string{"--leader-election-namespace"}, field.ErrorTypeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSharding()
			tt.mutate(&s)
			errs := s.Validate()
			require.Len(t, errs, len(tt.want), errs.ToAggregate())
			for i, e := range errs {
				assert.Equal(t, tt.want[i], e.Field)
				assert.Equal(t, tt.typ, e.Type)
			}
		})
	}
}

func TestShardingValidLeaveSettings(t *testing.T) {
	for _, mode := range []string{LeaveAuto, LeaveReturn, LeaveHandover} {
		for _, grace := range []time.Duration{time.Nanosecond, DefaultReturnGrace, MaxReturnGrace} {
			s := validSharding()
			s.LeaveMode, s.ReturnGrace = mode, grace
			assert.Empty(t, s.Validate(), "%s, %s", mode, grace)
		}
	}
}

// The renew deadline must leave the larger of 2 s and 20 % of the lease duration before the lease
// ends: the time to stop all work after a fence, timer latency and clock-rate drift.
func TestShardingFenceMargin(t *testing.T) {
	tests := []struct {
		name                      string
		duration, deadline, retry time.Duration
		wantError                 bool
	}{
		{"defaults: 5s of 15s", 15 * time.Second, 10 * time.Second, 2 * time.Second, false},
		{"20% of 15s exactly", 15 * time.Second, 12 * time.Second, 2 * time.Second, false},
		{"just under 20% of 15s", 15 * time.Second, 12*time.Second + time.Nanosecond, 2 * time.Second, true},
		{"under 20% of 15s", 15 * time.Second, 14900 * time.Millisecond, 2 * time.Second, true},
		{"2s floor of a short lease, exactly", 5 * time.Second, 3 * time.Second, time.Second, false},
		{"under the 2s floor though 20% is met", 5 * time.Second, 3500 * time.Millisecond, time.Second, true},
		{"2s floor up to a 10s lease", 10 * time.Second, 8 * time.Second, time.Second, false},
		{"20% of a long lease, exactly", 60 * time.Second, 48 * time.Second, 2 * time.Second, false},
		{"the 2s floor is not enough for a long lease", 60 * time.Second, 58 * time.Second, 2 * time.Second, true},
		{"deadline equal to the lease", 15 * time.Second, 15 * time.Second, 2 * time.Second, true},
		{"deadline past the lease", 15 * time.Second, 20 * time.Second, 2 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSharding()
			s.MemberLeaseDuration, s.MemberRenewDeadline, s.MemberRetryPeriod = tt.duration, tt.deadline, tt.retry
			errs := s.Validate()
			if !tt.wantError {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, errs.ToAggregate())
			assert.Equal(t, "--member-renew-deadline", errs[0].Field)
			for _, want := range []string{"--member-lease-duration", "stopping all work after a fence", "timer latency", "clock-rate drift"} {
				assert.Contains(t, errs[0].Detail, want)
			}
		})
	}
}

func TestShardingReportsEveryProblem(t *testing.T) {
	s := validSharding()
	s.GroupName, s.PartitionCount, s.RingLoadBound, s.ReplicationFactor = "", -1, 0.5, 0
	s.MemberRenewDeadline = 20 * time.Second
	s.LeaveMode, s.ReturnGrace = "stay", time.Hour
	s.PartitionFunction, s.CacheSharding = "md5", "some"
	var fields []string
	for _, e := range s.Validate() {
		fields = append(fields, e.Field)
	}
	assert.ElementsMatch(t, []string{"--shard-group", "--partitions", "--member-renew-deadline",
		"--ring-load-bound", "--ring-replication-factor", "--leave-mode", "--return-grace", "--partition-function", "--cache-sharding"}, fields)
}

func TestServerSideCacheShardingNeedsRangePartitions(t *testing.T) {
	s := validSharding()
	s.CacheSharding = CacheShardingServer
	assert.Empty(t, s.Validate())
	s.PartitionFunction = PartitionXXHashMod
	errs := s.Validate()
	require.Len(t, errs, 1)
	assert.Equal(t, "--cache-sharding", errs[0].Field)
	assert.Contains(t, errs[0].Detail, "needs --partition-function="+PartitionFNVRange)
}

func TestShardingFlags(t *testing.T) {
	s := DefaultSharding("g")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	s.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--shard-group=dwd", "--shard-namespace=garden", "--member-name=dwd-1",
		"--partitions=512", "--member-lease-duration=20s", "--member-renew-deadline=12s", "--member-retry-period=3s",
		"--ring-load-bound=1.1", "--ring-replication-factor=40", "--leave-mode=handover", "--return-grace=45s",
		"--partition-function=xxhash64-mod-v1", "--cache-sharding=off"}))
	assert.Equal(t, Sharding{GroupName: "dwd", Namespace: "garden", MemberName: "dwd-1", PartitionCount: 512,
		PartitionFunction: PartitionXXHashMod, CacheSharding: CacheShardingOff,
		MemberLeaseDuration: 20 * time.Second, MemberRenewDeadline: 12 * time.Second, MemberRetryPeriod: 3 * time.Second,
		RingLoadBound: 1.1, ReplicationFactor: 40, LeaveMode: LeaveHandover, ReturnGrace: 45 * time.Second}, s)
}

func longName(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}
