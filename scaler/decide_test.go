package scaler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

func TestDecide(t *testing.T) {
	marks := func(n string) map[string]string {
		return map[string]string{ReplicasAnnotation: n, MeltdownProtectionAnnotation: ""}
	}
	unmark := map[string]*string{ReplicasAnnotation: nil, MeltdownProtectionAnnotation: nil}
	tests := []struct {
		name        string
		dir         Direction
		replicas    int32
		annotations map[string]string
		want        decision // warnings compared by reason only, see below
		warnings    []string
	}{
		{name: "down, running", dir: Down, replicas: 3, want: decision{action: scaled, replicas: ptr.To[int32](0), from: 3, settle: true,
			annotations: map[string]*string{ReplicasAnnotation: ptr.To("3"), MeltdownProtectionAnnotation: ptr.To("")}}},
		{name: "down, running with old marks", dir: Down, replicas: 2, annotations: marks("5"), want: decision{action: scaled,
			replicas: ptr.To[int32](0), from: 2, settle: true,
			annotations: map[string]*string{ReplicasAnnotation: ptr.To("2"), MeltdownProtectionAnnotation: ptr.To("")}}},
		{name: "down, at 0: the record is never overwritten", dir: Down, annotations: marks("3"),
			want: decision{detail: "already at 0 replicas", settle: true}},
		{name: "down, ignored", dir: Down, replicas: 2, annotations: map[string]string{IgnoreScalingAnnotation: "true"},
			want: decision{detail: "ignore-scaling is set"}},
		{name: "down, ignored with the meltdown marker", dir: Down, replicas: 2,
			annotations: map[string]string{IgnoreScalingAnnotation: "true", MeltdownProtectionAnnotation: ""},
			want: decision{detail: "ignore-scaling is set, removing the meltdown annotation",
				annotations: map[string]*string{MeltdownProtectionAnnotation: nil}}},
		{name: "down, ignore-scaling not a bool", dir: Down, replicas: 1, annotations: map[string]string{IgnoreScalingAnnotation: "yes"},
			want: decision{action: scaled, replicas: ptr.To[int32](0), from: 1, settle: true,
				annotations: map[string]*string{ReplicasAnnotation: ptr.To("1"), MeltdownProtectionAnnotation: ptr.To("")}},
			warnings: []string{EventInvalidAnnotation}},
		{name: "up, at 0", dir: Up, annotations: marks("4"),
			want: decision{action: scaled, replicas: ptr.To[int32](4), to: 4, settle: true, annotations: unmark}},
		{name: "up, at 0 without the replicas annotation", dir: Up, annotations: map[string]string{MeltdownProtectionAnnotation: ""},
			want:     decision{action: scaled, replicas: ptr.To[int32](1), to: 1, settle: true, annotations: unmark},
			warnings: []string{EventMissingAnnotation}},
		{name: "up, at 0 above the bound", dir: Up, annotations: marks("51"),
			want:     decision{action: scaled, replicas: ptr.To[int32](1), to: 1, settle: true, annotations: unmark},
			warnings: []string{EventInvalidAnnotation}},
		{name: "up, running with the meltdown marker", dir: Up, replicas: 2, annotations: marks("2"),
			want: decision{action: completed, annotations: unmark, detail: "removing the annotations of an interrupted flow"}},
		{name: "up, running with a lone replicas annotation: for Cleanup", dir: Up, replicas: 2,
			annotations: map[string]string{ReplicasAnnotation: "2"}, want: decision{detail: "already above 0 replicas"}},
		{name: "up, ignored at 0", dir: Up, annotations: map[string]string{IgnoreScalingAnnotation: "true"},
			want: decision{detail: "ignore-scaling is set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.dir, tt.replicas, tt.annotations)
			var reasons []string
			for _, w := range got.warnings {
				reasons = append(reasons, w.reason)
			}
			got.warnings = nil
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.warnings, reasons)
			assert.Equal(t, tt.want.replicas != nil || tt.want.annotations != nil, got.writes())
		})
	}
}

func TestDecisionPatch(t *testing.T) {
	tests := []struct {
		name string
		d    decision
		want string
	}{
		{name: "down", d: decide(Down, 3, nil),
			want: `{"metadata":{"annotations":{"dependency-watchdog.gardener.cloud/meltdown-protection-active":"",` +
				`"dependency-watchdog.gardener.cloud/replicas":"3"},"resourceVersion":"7"},"spec":{"replicas":0}}`},
		{name: "up", d: decide(Up, 0, map[string]string{ReplicasAnnotation: "2", MeltdownProtectionAnnotation: ""}),
			want: `{"metadata":{"annotations":{"dependency-watchdog.gardener.cloud/meltdown-protection-active":null,` +
				`"dependency-watchdog.gardener.cloud/replicas":null},"resourceVersion":"7"},"spec":{"replicas":2}}`},
		{name: "annotations only", d: decision{annotations: map[string]*string{ReplicasAnnotation: nil}},
			want: `{"metadata":{"annotations":{"dependency-watchdog.gardener.cloud/replicas":null},"resourceVersion":"7"}}`},
		{name: "replicas only: no null that would remove every annotation", d: decision{replicas: ptr.To[int32](1)},
			want: `{"metadata":{"resourceVersion":"7"},"spec":{"replicas":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := tt.d.patch("7")
			require.NoError(t, err)
			data, err := patch.Data(&appsv1.Deployment{})
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(data))
		})
	}
}
