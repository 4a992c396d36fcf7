package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSetProberDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   *ProberConfig
		want *ProberConfig
	}{
		{"nil", nil, nil},
		{"unset fields get defaults, missing scale infos stay missing",
			&ProberConfig{DependentResourceInfos: []DependentResourceInfo{{ScaleUp: &ScaleInfo{Level: 1}}}},
			&ProberConfig{
				ProbeInterval: duration(DefaultProbeInterval), InitialDelay: duration(DefaultInitialDelay),
				ProbeTimeout: duration(DefaultProbeTimeout), BackoffJitterFactor: ptr(DefaultBackoffJitterFactor),
				KCMNodeMonitorGraceDuration: duration(DefaultKCMNodeMonitorGraceDuration),
				NodeLeaseFailureFraction:    ptr(DefaultNodeLeaseFailureFraction),
				DependentResourceInfos: []DependentResourceInfo{{ScaleUp: &ScaleInfo{
					Level: 1, InitialDelay: duration(DefaultScaleInitialDelay), Timeout: duration(DefaultScaleTimeout)}}},
			}},
		{"set fields are kept, even invalid ones",
			&ProberConfig{
				ProbeInterval: duration(time.Second), InitialDelay: duration(0), ProbeTimeout: duration(-time.Second),
				BackoffJitterFactor: ptr(0.0), KCMNodeMonitorGraceDuration: duration(time.Minute), NodeLeaseFailureFraction: ptr(2.0),
				DependentResourceInfos: []DependentResourceInfo{{ScaleDown: &ScaleInfo{InitialDelay: duration(time.Second), Timeout: duration(0)}}},
			},
			&ProberConfig{
				ProbeInterval: duration(time.Second), InitialDelay: duration(0), ProbeTimeout: duration(-time.Second),
				BackoffJitterFactor: ptr(0.0), KCMNodeMonitorGraceDuration: duration(time.Minute), NodeLeaseFailureFraction: ptr(2.0),
				DependentResourceInfos: []DependentResourceInfo{{ScaleDown: &ScaleInfo{InitialDelay: duration(time.Second), Timeout: duration(0)}}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetProberDefaults(tt.in)
			assert.Equal(t, tt.want, tt.in)
		})
	}
}

// TestDefaultsAreNotShared guards against defaults that point at one shared
// value: changing one config must not change another.
func TestDefaultsAreNotShared(t *testing.T) {
	a, b := &ProberConfig{}, &ProberConfig{}
	SetProberDefaults(a)
	SetProberDefaults(b)
	a.ProbeInterval.Duration = time.Hour
	*a.BackoffJitterFactor = 0.9
	require.Equal(t, DefaultProbeInterval, b.ProbeInterval.Duration)
	require.Equal(t, DefaultBackoffJitterFactor, *b.BackoffJitterFactor)
}

func TestSetWeederDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   *WeederConfig
		want *WeederConfig
	}{
		{"nil", nil, nil},
		{"unset", &WeederConfig{}, &WeederConfig{WatchDuration: duration(DefaultWatchDuration)}},
		{"set is kept", &WeederConfig{WatchDuration: duration(0)}, &WeederConfig{WatchDuration: duration(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetWeederDefaults(tt.in)
			assert.Equal(t, tt.want, tt.in)
		})
	}
}
