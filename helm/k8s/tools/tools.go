//go:build tools

// Package tools pins the Kubernetes API server, etcd and kubectl that `make test-k8s` and the
// e2e tests build (see ../README.md): go build k8s.io/kubernetes/cmd/kube-apiserver
// k8s.io/kubernetes/cmd/kubectl go.etcd.io/etcd/server/v3.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
