// Package e2e holds the end-to-end stories of dwd: real dwd processes (built by test.BuildDwd) on a
// real control plane, as an operator would run them.
//
//   - The RBAC stories: the whole demo story under the RBAC Gardener grants the original
//     (testdata/gardener-rbac.yaml, TestRBACGardener), a handover under it, each rule removed in turn
//     failing the story (TestRBACRuleRemovedFailsTheStory), and the forbidden and permission lines
//     the processes log.
//   - The dashboards and alerts on a real Prometheus scraping three replicas (TestDashboards, run by
//     make test-dashboards too, which also draws the dashboards in Debian's Chromium with package
//     test/dashview: dashview_test.go lists the panels the story has no data for).
//   - The secret scan: no process logs secret material (TestSecretScannerFindsPlantedSecrets proves
//     the scanner).
//   - The demo's story (TestDemo).
//
// Each test starts a simulated seed of its own; the seed, the shoots and the dwd processes on them
// come from benchmarks/sim and benchmarks/demo. The process tests of the dwd command itself (the
// three-process ownership audit, the original's leader mode, dwd shards) stay beside it in cmd/dwd,
// where they share its process helpers.
package e2e
