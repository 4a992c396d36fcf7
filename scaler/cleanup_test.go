package scaler_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

func TestCleanup(t *testing.T) {
	lone := func(n string) map[string]string { return map[string]string{scaler.ReplicasAnnotation: n} }
	ignoredLone := map[string]string{scaler.IgnoreScalingAnnotation: "true", scaler.ReplicasAnnotation: "2"}
	removal := write{op: opPatch, name: kcm, annotations: map[string]*string{scaler.ReplicasAnnotation: nil}}
	tests := []struct {
		name    string
		start   *state // of kube-controller-manager; nil: missing
		changed bool   // another writer changes it between the cache read and the patch
		needs   bool   // Needs.Cleanup
		needsUp bool   // NeedsScaling(Up)
		want    *state // after Cleanup; nil: as at the start
		writes  []write
		wantErr bool
	}{
		{name: "running with a lone replicas annotation (left by the original)", start: &state{replicas: 2, annotations: lone("2")},
			needs: true, want: &state{replicas: 2}, writes: []write{removal}},
		{name: "running with both annotations: for a scale-up flow", start: &state{replicas: 2, annotations: marks("2")}, needsUp: true},
		{name: "at 0 with a lone replicas annotation: the record to restore", start: &state{annotations: lone("2")}, needsUp: true},
		{name: "ignored, running with a lone replicas annotation", start: &state{replicas: 2, annotations: ignoredLone}},
		{name: "running without annotations", start: &state{replicas: 1}},
		{name: "missing (required: for a flow, which reports it)", start: nil, needsUp: true},
		{name: "changed since the cache read: Conflict, left for the next Cleanup", start: &state{replicas: 2, annotations: lone("2")},
			changed: true, needs: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, only(upstreamInfos(t), kcm))
			if tt.start != nil {
				f.create(t, kcm, tt.start.replicas, tt.start.annotations)
			}
			var once sync.Once
			f.journal.before = func(ctx context.Context, w write) (err error) {
				if tt.changed {
					once.Do(func() {
						d := f.get(t, kcm)
						d.Labels = map[string]string{"changed": "true"}
						err = env.Client.Update(ctx, d)
					})
				}
				return err
			}
			tokens := &tokenCounter{}
			f.scaler.Limiter = tokens

			up, err := f.scaler.NeedsScaling(context.Background(), f.ns, scaler.Up)
			require.NoError(t, err)
			assert.Equal(t, tt.needsUp, up, "NeedsScaling(Up)")
			of, err := f.scaler.NeedsOf(context.Background(), f.ns, scaler.Up)
			require.NoError(t, err)
			assert.Equal(t, scaler.Needs{Scaling: tt.needsUp, Cleanup: tt.needs}, of, "NeedsOf(Up), in one read")

			err = f.scaler.Cleanup(context.Background(), f.ns)

			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "Deployment "+f.ns+"/"+kcm)
				assert.True(t, apierrors.IsConflict(f.journal.failed()[0].err))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.writes, f.journal.done())
			assert.Equal(t, int32(len(f.journal.done())+len(f.journal.failed())), tokens.n.Load(), "one token per patch")
			assert.Empty(t, f.recorded(), "no Events")
			if tt.start == nil {
				return
			}
			want := tt.want
			if want == nil {
				want = tt.start
			}
			assert.Equal(t, *want, f.state(t, kcm))
		})
	}
}
