// Package deploy holds the kustomize manifests that run dwd on a seed, and builds them.
//
// The tree:
//
//   - base: one StatefulSet dwd whose replicas run the prober and the weeder (`dwd run`) and share the
//     shoot namespaces, its ServiceAccount, RBAC (a ClusterRole and a Role for its own namespace, each
//     rule with the code that needs it), the ConfigMap generated from prober.yaml and weeder.yaml,
//     a headless Service and a PodDisruptionBudget. It sets no namespace.
//   - overlays/sharded: the base in the namespace dwd-system with 3 replicas; overlays/single: the
//     same with one.
//   - overlays/gardener: dwd in place of the original in a Gardener seed, in the shape Gardener gives
//     the original (the prober and the weeder as StatefulSets of their own in garden, with the
//     original's names, command lines, ConfigMap key and labels), built from the base in
//     overlays/gardener/prober and overlays/gardener/weeder. The sharding Leases of both roles are in
//     the namespace dwd-shards (overlays/gardener/shards, which creates it and holds the Lease Roles),
//     so that nothing grants anything on a Lease of garden; in garden each account may only get its
//     own Pod and StatefulSet. Its kustomization.yaml says what to stop first and why no name clashes
//     with Gardener's objects. It also holds a VerticalPodAutoscaler per StatefulSet (vpa.yaml:
//     requests only, bounds from the benchmarks) and fluent-bit's ClusterFilter and ClusterParser for
//     dwd's JSON logs (overlays/gardener/logging, which applies alone too).
//   - components/metrics-auth: a component that serves /metrics behind authentication and
//     authorization (--metrics-secure). It works with every overlay above together with dwd's
//     PodMonitor: list it under `components:` of a kustomization that holds the overlay and the
//     PodMonitor, after what adds it. It appends the flag to the args of dwd's containers, adds the
//     reviews it sends to the ClusterRole of each replica's account (labelled
//     dwd.gardener.cloud/replica-rules), so that it names no account and follows the overlay's, and
//     switches the PodMonitor to HTTPS with the token of a scraper account (dwd-metrics-scraper, bound
//     to dwd-metrics-reader, its token Secret in the PodMonitor's namespace).
//   - components/monitoring: deploy/prometheus's PodMonitor and PrometheusRule in the namespace of the
//     StatefulSet dwd, for the sharded and single overlays.
//   - components/audit-log: the ownership audit (--audit-log) of every dwd container, on an emptyDir
//     at /var/log/dwd of its own (the root file system is read-only).
//   - components/runbooks: every alert's runbook_url at a base the user gives in a local-config
//     ConfigMap dwd-runbooks, for a seed that cannot reach GitHub.
//   - prometheus: a kustomization of the PodMonitor and the PrometheusRule (in garden, labelled
//     prometheus: seed), the alert rules as a plain rule file (rules.yaml, the same rules), their
//     promtool unit tests (rules_test.yaml, `make test-rules`); docs/monitoring.md has a runbook per
//     alert. prometheus_test.go checks that the two rule files agree, that every metric a rule names is
//     one dwd defines, and that every alert is tested firing and not firing and has a runbook;
//     monitoring_test.go decodes the PodMonitor and the PrometheusRule strictly into
//     prometheus-operator's Go types. The PodMonitor sets the label member (the pod's name) on every
//     series and names the job dwd: the one shard label the rules and dashboards use.
//   - grafana: the dashboards dwd / overview, dwd / shard and dwd / shoot as JSON for Plutono and Grafana, and a
//     kustomization that makes them a ConfigMap in garden labelled for Gardener's seed Plutono;
//     docs/dashboards.md describes them. grafana_test.go checks their structure (ids, datasources,
//     targets, variables, panel types Plutono has, the metrics named) and builds and applies the
//     ConfigMap. Package deploytest reads their expressions for these tests and for test/e2e's
//     TestDashboards (make test-dashboards), which evaluates each on a real Prometheus scraping real
//     replicas, as it does every alert of the rule file.
//
// The base's images entry is a placeholder: no image of dwd is published, so a user builds one with
// `make image`, pushes it, and sets the entry to it.
//
// ManagedResource renders a build as a Gardener seed ManagedResource and the Secret that holds its
// objects, so that the seed's gardener-resource-manager applies dwd and reports its health;
// managedresource is the command that prints one (make managedresource), BuildDir builds the
// kustomization on disk it renders.
//
// Build builds any of them with the kustomize API from the copy embedded in the binary, so that Go
// tests can apply exactly what `kubectl apply -k` applies. The tests of this package build every
// overlay, dry-run apply it into a real API server, run the real dwd with every container's command
// line and validate every config, and check what an operator relies on (security context, probes,
// the downward API, the budget's selector, the RBAC subjects, no wildcard, each account's permissions
// exactly what dwd checks, Leases granted only in the shard namespace). They test every overlay alone
// and with its monitoring and components/metrics-auth. The custom resources beside dwd (VPA, fluent-bit,
// ManagedResource, prometheus-operator) are applied against test copies of their CRDs
// (test.DeployCRDs), which the tests install into the package's API server.
package deploy
