//go:build tools

// Package tools pins the control-plane binaries the integration tests run: kube-apiserver and etcd are
// built from source through the Go module proxy by `make tools`, since envtest's download cannot work here.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
