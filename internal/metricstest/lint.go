package metricstest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// placeholder is the value of every label of the series Lint makes, so that a vector without series
// is linted too; Lint deletes them before it returns.
const placeholder = "promlint"

// maxLabels bounds the label count Lint tries when it makes a series of a vector.
const maxLabels = 10

// vec is what every client_golang metric vector has.
type vec interface {
	prometheus.Collector
	DeleteLabelValues(lvs ...string) bool
}

// Lint fails t for every promlint problem of the dwd_* metrics among collectors, except those allowed
// maps to a reason for: "metric: problem text" as promlint words it. An allowed problem that no longer
// occurs fails too, so that the allowlist shrinks with the fixes.
func Lint(t *testing.T, allowed map[string]string, collectors ...prometheus.Collector) {
	t.Helper()
	unexpected, unseen, err := check(t, allowed, collectors...)
	require.NoError(t, err)
	assert.Empty(t, unexpected, "promlint problems")
	assert.Empty(t, unseen, "allowed promlint problems that no longer occur: remove them")
}

// check returns the promlint problems of the dwd_* metrics among collectors that allowed does not hold,
// and those allowed holds that did not occur.
func check(t *testing.T, allowed map[string]string, collectors ...prometheus.Collector) (unexpected, unseen []string, err error) {
	reg := prometheus.NewPedanticRegistry()
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, nil, err
		}
		if v, ok := c.(vec); ok {
			labels, err := addSeries(v)
			if err != nil {
				return nil, nil, err
			}
			t.Cleanup(func() { v.DeleteLabelValues(labels...) })
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, nil, err
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	for _, p := range problems {
		key := p.Metric + ": " + p.Text
		if !strings.HasPrefix(p.Metric, "dwd_") || seen[key] {
			continue
		}
		seen[key] = true
		if _, ok := allowed[key]; !ok {
			unexpected = append(unexpected, key)
		}
	}
	for key := range allowed {
		if !seen[key] {
			unseen = append(unseen, key)
		}
	}
	return unexpected, unseen, nil
}

// addSeries makes a series of v with every label set to placeholder and returns its label values.
func addSeries(v vec) ([]string, error) {
	for n := 0; n <= maxLabels; n++ {
		lvs := make([]string, n)
		for i := range lvs {
			lvs[i] = placeholder
		}
		if err := with(v, lvs); err == nil {
			return lvs, nil
		}
	}
	return nil, fmt.Errorf("no series of %T with up to %d labels", v, maxLabels)
}

func with(v vec, lvs []string) error {
	switch v := v.(type) {
	case *prometheus.CounterVec:
		_, err := v.GetMetricWithLabelValues(lvs...)
		return err
	case *prometheus.GaugeVec:
		_, err := v.GetMetricWithLabelValues(lvs...)
		return err
	case *prometheus.HistogramVec:
		_, err := v.GetMetricWithLabelValues(lvs...)
		return err
	case *prometheus.SummaryVec:
		_, err := v.GetMetricWithLabelValues(lvs...)
		return err
	}
	return fmt.Errorf("unknown vector type %T", v)
}

// Series returns the label sets of the series c exports now, without making any.
func Series(c prometheus.Collector) []map[string]string {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	var series []map[string]string
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		series = append(series, labels)
	}
	return series
}
