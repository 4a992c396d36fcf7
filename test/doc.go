// Package test starts the real control plane the integration tests run against: a kube-apiserver and
// an etcd built from source by `make tools` (see tools/), with the test CRDs of crds/ installed
// (Gardener's extensions Cluster and machine-controller-manager's Machine).
//
// Each test package starts one control plane in TestMain with Main and gives each test its own
// namespace with Environment.Namespace. Under `go test -short` no control plane is started and the
// integration tests skip themselves with Environment.Require. A test that binds RBAC to a user it
// impersonates waits with AwaitGranted until the API server's authorizer grants it.
//
// A Proxy stands between a client and the API server and cuts it off on demand; Proxy.Kubeconfig
// points a dwd process's kubeconfig through one. The chaos suite (test/chaos) runs dwd processes
// against this control plane through proxies (benchmarks/sim's ReplicaSet starts them), and restarts
// its API server on the same etcd with StopAPIServer and StartAPIServer.
package test
