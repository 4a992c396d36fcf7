package scaler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

func TestMeltdownProtected(t *testing.T) {
	tests := []struct {
		name  string
		start *state // of kube-controller-manager; nil: missing
		want  bool
	}{
		{name: "scaled down and marked", start: &state{annotations: marks("2")}, want: true},
		{name: "running and marked (a flow cut short)", start: &state{replicas: 2, annotations: marks("2")}, want: true},
		{name: "at 0 without the marker", start: &state{annotations: map[string]string{scaler.ReplicasAnnotation: "2"}}},
		{name: "running without annotations", start: &state{replicas: 1}},
		{name: "missing", start: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, only(upstreamInfos(t), kcm))
			if tt.start != nil {
				f.create(t, kcm, tt.start.replicas, tt.start.annotations)
			}
			got, err := f.scaler.MeltdownProtected(context.Background(), f.ns)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
