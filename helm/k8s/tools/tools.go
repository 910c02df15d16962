//go:build tools

// Package tools pins the Kubernetes binaries the tests build (see ../README.md), all from the
// k8s.io/kubernetes module: kube-apiserver and kubectl with etcd (make test-k8s, the e2e tests),
// and the node's parts (make test-k8s-node): kube-controller-manager, kube-scheduler, kubelet
// and kube-proxy.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
