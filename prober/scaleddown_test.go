package prober

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// fakeSource is the source of a replica whose caches hold the namespaces of shoots (each mapped to
// whether it is scaled down) and that owns owned.
func fakeSource(shoots map[string]bool, owned ...string) *scaledDownSource {
	return &scaledDownSource{
		Shoots: func() map[string]bool { return maps.Clone(shoots) },
		Owns:   func(ns string) bool { return slices.Contains(owned, ns) },
	}
}

// scaledDownText is the exposition of the scaled-down metrics for series, namespace → value.
func scaledDownText(series map[string]float64) string {
	var b strings.Builder
	down := 0
	if len(series) > 0 {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", scaledDownOpts.Name, scaledDownOpts.Help, scaledDownOpts.Name)
		for _, ns := range slices.Sorted(maps.Keys(series)) {
			fmt.Fprintf(&b, "%s{namespace=%q} %g\n", scaledDownOpts.Name, ns, series[ns])
			down += int(series[ns])
		}
	}
	fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", scaledDownCountOpts.Name, scaledDownCountOpts.Help,
		scaledDownCountOpts.Name, scaledDownCountOpts.Name, down)
	return b.String()
}

func TestScaledDownExportsTheShootsThisReplicaOwns(t *testing.T) {
	tests := []struct {
		name    string
		sources []*scaledDownSource
		want    map[string]float64
	}{
		{name: "no prober: the count alone, 0"},
		{name: "the shoots owned here, 1 when marked, whether or not they are probed",
			sources: []*scaledDownSource{fakeSource(map[string]bool{"shoot--a": true, "shoot--b": false, "shoot--c": true},
				"shoot--a", "shoot--b", "shoot--d")},
			want: map[string]float64{"shoot--a": 1, "shoot--b": 0}},
		{name: "a shoot of a partition another replica owns is that replica's to export",
			sources: []*scaledDownSource{fakeSource(map[string]bool{"shoot--a": true})}},
		{name: "several probers in one process: each shoot once, scaled down if one sees it so",
			sources: []*scaledDownSource{fakeSource(map[string]bool{"shoot--a": true, "shoot--b": false}, "shoot--a", "shoot--b"),
				fakeSource(map[string]bool{"shoot--a": true, "shoot--b": true}, "shoot--b")},
			want: map[string]float64{"shoot--a": 1, "shoot--b": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &scaledDownCollector{}
			for _, s := range tt.sources {
				c.add(s)
			}
			require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(scaledDownText(tt.want))))
		})
	}
}

// TestScaledDownSourceLeavesWithItsProber: a prober's source exports while it runs and nothing once
// its context ends (the prober stopped; its caches go stale).
func TestScaledDownSourceLeavesWithItsProber(t *testing.T) {
	c := &scaledDownCollector{}
	s := fakeSource(map[string]bool{"shoot--a": true}, "shoot--a")
	s.Collector = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	require.Eventually(t, func() bool { return testutil.CollectAndCount(c, scaledDownOpts.Name) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(scaledDownText(map[string]float64{"shoot--a": 1}))))

	cancel()
	require.NoError(t, <-done)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(scaledDownText(nil))))
}

func TestDependentMarks(t *testing.T) {
	kcm, mcm := dependentKey{"Deployment", "kube-controller-manager"}, dependentKey{"Deployment", "machine-controller-manager"}
	deployment := func(ns, name string, marked bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if marked {
			d.Annotations = map[string]string{scaler.MeltdownProtectionAnnotation: ""}
		}
		return d
	}
	m := &dependentMarks{}
	assert.Empty(t, m.shoots())

	m.set(kcm, deployment("shoot--a", kcm.name, false))
	m.set(mcm, deployment("shoot--a", mcm.name, true))
	m.set(kcm, deployment("shoot--b", kcm.name, false))
	assert.Equal(t, map[string]bool{"shoot--a": true, "shoot--b": false}, m.shoots(), "one marked dependent marks its shoot")

	m.set(mcm, deployment("shoot--a", mcm.name, false))
	assert.Equal(t, map[string]bool{"shoot--a": false, "shoot--b": false}, m.shoots(), "a scale-up removed the marker")

	m.set(kcm, deployment("shoot--b", kcm.name, true))
	m.remove(kcm, toolscache.DeletedFinalStateUnknown{Key: "shoot--b/kube-controller-manager", Obj: nil})
	m.remove(kcm, deployment("shoot--a", kcm.name, false))
	assert.Equal(t, map[string]bool{"shoot--a": false}, m.shoots(), "a namespace goes with its last dependent, a missed delete too")
	m.remove(mcm, deployment("shoot--a", mcm.name, false))
	assert.Empty(t, m.shoots())
}
