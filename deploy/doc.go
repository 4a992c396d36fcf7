// Package deploy holds the manifests that run dwd on a seed: a kustomize base with a StatefulSet and
// overlays, the Grafana dashboards and the Prometheus rules. Its Go tests check that the manifests
// agree with the binary (flags, ports, RBAC).
package deploy
