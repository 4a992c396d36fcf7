package scaler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

func TestTargetReplicas(t *testing.T) {
	tests := []struct {
		name    string
		value   *string
		want    int32
		wantErr bool
	}{
		{name: "absent", want: 1},
		{name: "recorded", value: new("3"), want: 3},
		{name: "at the bound", value: new("50"), want: 50},
		{name: "above the bound", value: new("51"), want: 1, wantErr: true},
		{name: "huge", value: new("100000"), want: 1, wantErr: true},
		{name: "zero", value: new("0"), want: 1, wantErr: true},
		{name: "negative", value: new("-2"), want: 1, wantErr: true},
		{name: "not a number", value: new("three"), want: 1, wantErr: true},
		{name: "empty", value: new(""), want: 1, wantErr: true},
		{name: "too large", value: new("4294967296"), want: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			annotations := map[string]string{"other": "x"}
			if tt.value != nil {
				annotations[scaler.ReplicasAnnotation] = *tt.value
			}
			got, err := scaler.TargetReplicas(annotations)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantErr, err != nil, "error: %v", err)
		})
	}
}

func TestIgnoreScalingAnnotation(t *testing.T) {
	tests := []struct {
		name    string
		value   *string
		want    bool
		wantErr bool
	}{
		{name: "absent"},
		{name: "true", value: new("true"), want: true},
		{name: "True", value: new("True"), want: true},
		{name: "1", value: new("1"), want: true},
		{name: "false", value: new("false")},
		{name: "invalid", value: new("yes"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var annotations map[string]string
			if tt.value != nil {
				annotations = map[string]string{scaler.IgnoreScalingAnnotation: *tt.value}
			}
			got, err := scaler.IgnoreScaling(annotations)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantErr, err != nil, "error: %v", err)
		})
	}
}
