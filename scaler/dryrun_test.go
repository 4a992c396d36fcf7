package scaler_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

func dryRunScales(t *testing.T, dir scaler.Direction) float64 {
	return metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": dryrun.KindScale, "direction": dir.String()})
}

// In dry run a flow sends no write, and what it would have written is what the next reads see: a
// second scale-down finds nothing to do, the scale-up undoes the first, and each is counted once.
func TestDryRunSendsNothingAndReadsWhatItWouldHaveWritten(t *testing.T) {
	f := newFixture(t, withoutDelays(upstreamInfos(t)))
	before := map[string]int32{kcm: 1, mcm: 2, ca: 3}
	for name, n := range before {
		f.create(t, name, n, nil)
	}
	dryRunFlows(t, f.scaler, f.ns)
	assert.Empty(t, f.journal.writes, "nothing was sent")
	for name, n := range before {
		assert.Equal(t, state{replicas: n}, f.state(t, name), name)
	}
}

// The same on a fake client, without a control plane: the mutation check's quick proof of the rule.
func TestDryRunOnAFakeClientSendsNothing(t *testing.T) {
	j := &journal{}
	var objs []client.Object
	for name, n := range map[string]int32{kcm: 1, mcm: 2, ca: 3} {
		objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--a", Name: name, ResourceVersion: "7"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(n)}})
	}
	c := fake.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(j.funcs()).Build()
	s := &scaler.Scaler{Client: c, Log: testr.New(t), Resources: withoutDelays(upstreamInfos(t))}
	dryRunFlows(t, s, "shoot--a")
	assert.Empty(t, j.writes, "nothing was sent")
}

// dryRunFlows runs a scale-down twice and a scale-up on namespace with s in dry run, and checks what
// each reads and counts.
func dryRunFlows(t *testing.T, s *scaler.Scaler, namespace string) {
	s.DryRun = dryrun.New(testr.New(t))
	down, up := dryRunScales(t, scaler.Down), dryRunScales(t, scaler.Up)
	ctx := context.Background()

	require.NoError(t, s.Scale(ctx, namespace, scaler.Down, meltdown))
	assert.Equal(t, down+3, dryRunScales(t, scaler.Down))
	needs, err := s.NeedsScaling(ctx, namespace, scaler.Down)
	require.NoError(t, err)
	assert.False(t, needs, "the scale-down not sent is what the next probe reads")
	require.NoError(t, s.Scale(ctx, namespace, scaler.Down, meltdown))
	assert.Equal(t, down+3, dryRunScales(t, scaler.Down), "a second scale-down has nothing to do")

	needs, err = s.NeedsScaling(ctx, namespace, scaler.Up)
	require.NoError(t, err)
	assert.True(t, needs, "the recovered shoot is to be scaled up")
	require.NoError(t, s.Scale(ctx, namespace, scaler.Up, meltdown))
	assert.Equal(t, up+3, dryRunScales(t, scaler.Up))
	needs, err = s.NeedsScaling(ctx, namespace, scaler.Up)
	require.NoError(t, err)
	assert.False(t, needs)
}
