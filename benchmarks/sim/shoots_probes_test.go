package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"
)

func TestProbeStatsGaps(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name       string
		before     []int // probes before the mark, in seconds from t0
		after      []int // probes since the mark
		now        int
		wantMaxGap time.Duration
		wantGap    time.Duration
	}{
		{name: "never probed", now: 100},
		{name: "one probe: no gap yet, the open one counts at now", after: []int{10}, now: 15, wantGap: 5 * time.Second},
		{name: "the longest of the gaps", after: []int{0, 10, 31, 40}, now: 45, wantMaxGap: 21 * time.Second, wantGap: 21 * time.Second},
		{name: "a gap that spans the mark counts whole", before: []int{0, 10}, after: []int{28, 38}, now: 40,
			wantMaxGap: 18 * time.Second, wantGap: 18 * time.Second},
		{name: "gaps before the mark are forgotten", before: []int{0, 30}, after: []int{40}, now: 41,
			wantMaxGap: 10 * time.Second, wantGap: 10 * time.Second},
		{name: "a shoot no longer probed shows at now", after: []int{0, 10}, now: 70, wantMaxGap: 10 * time.Second, wantGap: 60 * time.Second},
		{name: "no probe since the mark: the open gap from the last before it", before: []int{0}, now: 25, wantGap: 25 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p ProbeStats
			for _, s := range tt.before {
				p.observe("a", at(s))
			}
			p.mark()
			for _, s := range tt.after {
				p.observe("a", at(s))
			}
			assert.Equal(t, tt.wantMaxGap, p.MaxGap)
			assert.Equal(t, tt.wantGap, p.Gap(at(tt.now)))
		})
	}
}

func TestProbeStatsProbers(t *testing.T) {
	t.Parallel()
	var p ProbeStats
	p.observe("old", t0)
	p.mark()
	assert.Empty(t, p.Probers, "the mark forgets who probed before it")
	p.observe("b", t0.Add(10*time.Second))
	p.observe("a", t0.Add(11*time.Second))
	p.observe("b", t0.Add(20*time.Second))
	assert.Equal(t, []Prober{
		{Agent: "b", First: t0.Add(10 * time.Second), Last: t0.Add(20 * time.Second), Probes: 2},
		{Agent: "a", First: t0.Add(11 * time.Second), Last: t0.Add(11 * time.Second), Probes: 1},
	}, p.Probers, "in the order of their first probe since the mark")
	got, ok := p.By("a")
	assert.True(t, ok)
	assert.Equal(t, 1, got.Probes)
	_, ok = p.By("old")
	assert.False(t, ok)

	c := p.clone()
	c.Probers[0].Probes = 99
	assert.Equal(t, 2, p.Probers[0].Probes, "a clone shares nothing")
}

func TestShootServerProbeStats(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	s := startShootServer(t, ShootServerOptions{Clock: clk})
	s.AddShoot("a", []string{"a-0"})
	s.AddShoot("idle", nil)
	as := func(agent string) kubernetes.Interface {
		cfg := restConfig(t, s, "a")
		cfg.UserAgent = agent
		return clientFor(t, cfg)
	}
	one, two := as("dwd-prober/dev (dwd-0)"), as("dwd-prober/dev (dwd-1)")
	probe := func(cs kubernetes.Interface) {
		t.Helper()
		_, err := cs.CoordinationV1().Leases("kube-node-lease").List(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
		require.NoError(t, err)
	}

	probe(one)
	clk.Step(4 * time.Second)
	_, err := one.Discovery().ServerVersion()
	require.NoError(t, err, "not a probe: it does not end a gap")
	clk.Step(6 * time.Second)
	s.MarkProbes()
	probe(two)
	clk.Step(3 * time.Second)
	require.NoError(t, getNodesOnce(t.Context(), two), "a probe: a cycle whose Node list fails sends no lease list")

	stats := s.ProbeStats()
	assert.Equal(t, ProbeStats{
		Last: t0.Add(13 * time.Second), MaxGap: 10 * time.Second, LastAgent: "dwd-prober/dev (dwd-1)",
		MaxGapEnd: t0.Add(10 * time.Second), MaxGapFrom: "dwd-prober/dev (dwd-0)", MaxGapTo: "dwd-prober/dev (dwd-1)",
		Probers: []Prober{{Agent: "dwd-prober/dev (dwd-1)", First: t0.Add(10 * time.Second), Last: t0.Add(13 * time.Second), Probes: 2}},
	}, stats["a"])
	assert.Equal(t, ProbeStats{}, stats["idle"], "a shoot never probed")
}
