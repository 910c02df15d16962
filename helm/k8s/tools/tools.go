//go:build tools

// Package tools pins the Kubernetes API server and etcd that `make test-k8s` builds (see
// ../README.md): go build k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
