package deploytest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpandQuery(t *testing.T) {
	vars := map[string]string{"shard": ".*", "group": "dwd-prober", "__rate_interval": "1m", "__range": "5m"}
	for _, tc := range []struct{ expr, want string }{
		{`up{member=~"$shard"}`, `up{member=~".*"}`},
		{`up{member=~"${shard}"}`, `up{member=~".*"}`},
		{`up{member=~"[[shard]]"}`, `up{member=~".*"}`},
		{`rate(x{group=~"$group",member=~"$shard"}[$__rate_interval])`, `rate(x{group=~"dwd-prober",member=~".*"}[1m])`},
		{`increase(x[$__range]) + increase(y[${__range}])`, `increase(x[5m]) + increase(y[5m])`},
		{`x[$__range_s] $shardx $zone ${zone} [[zone]]`, `x[$__range_s] $shardx $zone ${zone} [[zone]]`},
		{`$shard$group`, `.*dwd-prober`},
		{`no variable`, `no variable`},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			assert.Equal(t, tc.want, ExpandQuery(tc.expr, vars))
		})
	}
}

func TestDashboardQueries(t *testing.T) {
	files := map[string][]byte{
		"b.json": []byte(`{"panels": [
			{"id": 1, "type": "row", "title": "R", "collapsed": true, "panels": [
				{"id": 2, "title": "nested", "targets": [{"refId": "A", "expr": "x", "instant": true}]}]},
			{"id": 3, "title": "P", "targets": [{"refId": "A", "expr": "y"}, {"refId": "B", "expr": "z"}]}],
			"annotations": {"list": [{"builtIn": 1, "name": "Annotations & Alerts"}, {"name": "Scale", "expr": "s > 0"}]}}`),
		"a.json": []byte(`{"panels": [{"id": 7, "title": "first", "targets": [{"refId": "A", "expr": "w"}]}]}`),
	}
	queries, err := dashboardQueries(files)
	require.NoError(t, err)
	assert.Equal(t, []DashboardQuery{
		{Dashboard: "a.json", PanelID: 7, Panel: "first", RefID: "A", Expr: "w"},
		{Dashboard: "b.json", PanelID: 2, Panel: "nested", RefID: "A", Expr: "x", Instant: true},
		{Dashboard: "b.json", PanelID: 3, Panel: "P", RefID: "A", Expr: "y"},
		{Dashboard: "b.json", PanelID: 3, Panel: "P", RefID: "B", Expr: "z"},
		{Dashboard: "b.json", Panel: "Scale", Expr: "s > 0", Annotation: true},
	}, queries)

	for _, bad := range []string{`{"panels": [`, `{"panels": {"id": 1}}`, `{"panels": [{"targets": "x"}]}`, `[]`,
		`{"panels": [], "annotations": {"list": {"expr": "x"}}}`} {
		t.Run(bad, func(t *testing.T) {
			_, err := dashboardQueries(map[string][]byte{"a.json": []byte("{}"), "bad.json": []byte(bad)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "dashboard bad.json")
		})
	}
}

func TestVariables(t *testing.T) {
	assert.Equal(t, []string{"shard", "group", "__rate_interval", "shard"},
		Variables(`rate(x{member=~"$shard",group="${group}"}[[[__rate_interval]]]) / $shard`))
	assert.Empty(t, Variables("no variable"))
}
