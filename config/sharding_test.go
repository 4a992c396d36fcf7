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

func TestShardingReportsEveryProblem(t *testing.T) {
	s := validSharding()
	s.GroupName, s.PartitionCount, s.RingLoadBound, s.ReplicationFactor = "", -1, 0.5, 0
	s.MemberRenewDeadline = 20 * time.Second
	var fields []string
	for _, e := range s.Validate() {
		fields = append(fields, e.Field)
	}
	assert.ElementsMatch(t, []string{"--shard-group", "--partitions", "--member-renew-deadline",
		"--ring-load-bound", "--ring-replication-factor"}, fields)
}

func TestShardingFlags(t *testing.T) {
	s := DefaultSharding("g")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	s.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--shard-group=dwd", "--shard-namespace=garden", "--member-name=dwd-1",
		"--partitions=512", "--member-lease-duration=20s", "--member-renew-deadline=12s", "--member-retry-period=3s",
		"--ring-load-bound=1.1", "--ring-replication-factor=40"}))
	assert.Equal(t, Sharding{GroupName: "dwd", Namespace: "garden", MemberName: "dwd-1", PartitionCount: 512,
		MemberLeaseDuration: 20 * time.Second, MemberRenewDeadline: 12 * time.Second, MemberRetryPeriod: 3 * time.Second,
		RingLoadBound: 1.1, ReplicationFactor: 40}, s)
}

func longName(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}
