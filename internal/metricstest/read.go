package metricstest

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Gathered returns the series of the metric name in controller-runtime's registry (the one a dwd
// process serves) whose labels include every one of labels; none while it has no such series.
func Gathered(t testing.TB, name string, labels map[string]string) []*dto.Metric {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering the metrics: %v", err)
	}
	var series []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m.GetLabel(), labels) {
				series = append(series, m)
			}
		}
	}
	return series
}

// Sum adds up the series Gathered returns: a counter's or a gauge's value, a histogram's or a
// summary's sample count; 0 while there is none.
func Sum(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range Gathered(t, name, labels) {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue() +
			float64(m.GetHistogram().GetSampleCount()) + float64(m.GetSummary().GetSampleCount())
	}
	return sum
}

// hasLabels tells whether pairs hold every one of labels.
func hasLabels(pairs []*dto.LabelPair, labels map[string]string) bool {
	matched := 0
	for _, l := range pairs {
		if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
			matched++
		}
	}
	return matched == len(labels)
}
