// Package deploytest reads the dashboards and the PromQL of the deploy tree for tests: the dashboard
// files (Dashboards), every query of every panel (DashboardQueries), the variables a query refers to
// (Variables), a query with its variables filled in (ExpandQuery), and the metric names an expression
// selects (MetricNames). The tests of package deploy check the dashboards and rules with them;
// test/e2e's TestDashboards evaluates each query and alert on a real Prometheus scraping real
// replicas.
//
// It reads the files of the source tree (deploy/grafana), where the tests run, not a copy in a binary.
package deploytest
