package config

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FuzzDecodeProberConfig checks that no input panics, that a config comes
// back exactly when there are no errors, and that a returned config is valid
// and so fully defaulted. Seeds: the testdata files and a minimal config.
func FuzzDecodeProberConfig(f *testing.F) {
	addTestdataSeeds(f)
	f.Add([]byte(minimalProber))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, errs := DecodeProberConfig(data)
		checkDecodeResult(t, cfg == nil, errs)
		lenient, unknown, lenientErrs := DecodeProberConfigLenient(data)
		checkDecodeResult(t, lenient == nil, lenientErrs)
		require.Equal(t, errs, append(unknown, lenientErrs...), "strict = lenient + unknown keys")
		if cfg != nil {
			require.Empty(t, ValidateProberConfig(cfg))
			// The prober's longest jittered period cannot overflow a time.Duration.
			require.Less(t, float64(cfg.ProbeInterval.Duration)*(1+*cfg.BackoffJitterFactor), float64(math.MaxInt64))
		}
	})
}

// FuzzDecodeWeederConfig is FuzzDecodeProberConfig for the weeder.
func FuzzDecodeWeederConfig(f *testing.F) {
	addTestdataSeeds(f)
	f.Add([]byte(minimalWeeder))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, errs := DecodeWeederConfig(data)
		checkDecodeResult(t, cfg == nil, errs)
		lenient, unknown, lenientErrs := DecodeWeederConfigLenient(data)
		checkDecodeResult(t, lenient == nil, lenientErrs)
		require.Equal(t, errs, append(unknown, lenientErrs...), "strict = lenient + unknown keys")
		if cfg != nil {
			require.Empty(t, ValidateWeederConfig(cfg))
		}
	})
}

// checkDecodeResult requires errors exactly when no config came back, and
// every error to name a field.
func checkDecodeResult(t *testing.T, noConfig bool, errs field.ErrorList) {
	t.Helper()
	require.Equal(t, noConfig, len(errs) > 0, "errors: %v", errs)
	for _, e := range errs {
		require.NotNil(t, e)
		require.NotEmpty(t, e.Field)
	}
}
