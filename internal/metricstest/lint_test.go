package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	bad := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dwd_bad_milliseconds", Help: "A bad counter."}, []string{"someLabel"})
	good := prometheus.NewGauge(prometheus.GaugeOpts{Name: "dwd_good", Help: "A good gauge."})
	problems := []string{
		`dwd_bad_milliseconds: counter metrics should have "_total" suffix`,
		`dwd_bad_milliseconds: label names should be written in 'snake_case' not 'camelCase'`,
		`dwd_bad_milliseconds: use base unit "seconds" instead of "milliseconds"`,
	}

	t.Run("every problem of a vector without series", func(t *testing.T) {
		unexpected, unseen, err := check(t, nil, bad, good)
		require.NoError(t, err)
		assert.ElementsMatch(t, problems, unexpected)
		assert.Empty(t, unseen)
	})
	t.Run("allowed problems and those gone", func(t *testing.T) {
		allowed := map[string]string{problems[0]: "test", problems[1]: "test", "dwd_good: gone": "test"}
		unexpected, unseen, err := check(t, allowed, bad)
		require.NoError(t, err)
		assert.Equal(t, problems[2:], unexpected)
		assert.Equal(t, []string{"dwd_good: gone"}, unseen)
	})
	t.Run("the series made are removed", func(t *testing.T) {
		assert.Zero(t, testutil.CollectAndCount(bad))
	})
}

func TestSeriesListsWhatACollectorExports(t *testing.T) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dwd_series_total", Help: "h"}, []string{"a"})
	assert.Empty(t, Series(v))
	v.WithLabelValues("x")
	assert.Equal(t, []map[string]string{{"a": "x"}}, Series(v))
}
