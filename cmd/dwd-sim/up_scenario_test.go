package main

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

func TestScenarioFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    sim.Scenario
		wantErr string
	}{
		{name: "default", want: sim.Scenario{}},
		{name: "stale cache", args: []string{"--scenario=stalecache", "--cache-lag=60s"}, want: sim.Scenario{Kind: sim.StaleCache, CacheLag: time.Minute}},
		{name: "lies together", args: []string{"--scenario=SlowBody", "--delay=28s", "--node-clock-offset=-90s", "--server-clock-offset=1m", "--extra-leases=200000", "--extra-nodes=5"},
			want: sim.Scenario{Kind: sim.SlowBody, Delay: 28 * time.Second, NodeClockOffset: -90 * time.Second, ServerClockOffset: time.Minute, ExtraLeases: 200000, ExtraNodes: 5}},
		{name: "throttled", args: []string{"--scenario=Throttled", "--retry-after=5s"}, want: sim.Scenario{Kind: sim.Throttled, RetryAfter: 5 * time.Second}},
		{name: "meltdown", args: []string{"--scenario=meltdown", "--expired-fraction=0.7"}, want: sim.Scenario{Kind: sim.Meltdown, ExpiredFraction: 0.7}},
		{name: "unknown kind", args: []string{"--scenario=Lying"}, wantErr: `unknown scenario kind "Lying"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &scenarioFlags{}
			fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
			f.addFlags(fs)
			require.NoError(t, fs.Parse(tc.args))
			got, err := f.scenario()
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.NoError(t, got.Validate())
		})
	}
}
