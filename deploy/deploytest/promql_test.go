package deploytest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`dwd_a > 0`, []string{"dwd_a"}},
		{`max by (group) (dwd_a{member="x", le="+Inf"}) > 0 or count by (group, partitions) (dwd_b) > 1`,
			[]string{"dwd_a", "dwd_b"}},
		{`timestamp(dwd_a) - dwd_a > 10 and dwd_a > 0 or increase(dwd_b_total[5m]) > 3`, []string{"dwd_a", "dwd_b_total"}},
		{`histogram_quantile(0.99, sum by (pod, le) (rate(dwd_c_bucket[5m]))) > 10`, []string{"dwd_c_bucket"}},
		{"(sum by (pod) (rate(x[5m])) or 0 * max by (pod) (y)) == 0\nand on (pod) max without (le) (z) > 0 unless ignoring(a) bool_x",
			[]string{"x", "y", "z", "bool_x"}},
		{`time() - up offset 5m > 120`, []string{"up"}},
		{`x unless y offset $__interval or z offset ${__interval}`, []string{"x", "y", "z"}},
		{"x - y\n<= on (member) group_left\n12 * (z or 0 * max by (member) (w) + 10) > on (a) group_right (b) v",
			[]string{"x", "y", "z", "w", "v"}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			assert.Equal(t, tc.want, MetricNames(tc.expr))
		})
	}
}
