package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestSumAddsUpTheSeriesWithTheLabels(t *testing.T) {
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metricstest_read_total", Help: "h"}, []string{"a", "b"})
	histogram := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "metricstest_read_seconds", Help: "h"}, []string{"a"})
	metrics.Registry.MustRegister(counter, histogram)
	t.Cleanup(func() { metrics.Registry.Unregister(counter); metrics.Registry.Unregister(histogram) })

	assert.Zero(t, Sum(t, "metricstest_read_total", nil), "no series yet")
	counter.WithLabelValues("x", "1").Add(2)
	counter.WithLabelValues("x", "2").Add(3)
	counter.WithLabelValues("y", "1").Add(5)
	histogram.WithLabelValues("x").Observe(9)
	histogram.WithLabelValues("x").Observe(9)

	assert.Equal(t, 10.0, Sum(t, "metricstest_read_total", nil))
	assert.Equal(t, 5.0, Sum(t, "metricstest_read_total", map[string]string{"a": "x"}))
	assert.Equal(t, 2.0, Sum(t, "metricstest_read_total", map[string]string{"a": "x", "b": "1"}))
	assert.Zero(t, Sum(t, "metricstest_read_total", map[string]string{"a": "z"}))
	assert.Len(t, Gathered(t, "metricstest_read_total", map[string]string{"b": "1"}), 2)
	assert.Equal(t, 2.0, Sum(t, "metricstest_read_seconds", map[string]string{"a": "x"}), "a histogram counts its samples")
}
