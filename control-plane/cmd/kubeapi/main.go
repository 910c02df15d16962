// Command weighstation-kubeapi runs a real etcd and kube-apiserver on loopback ports (the
// binaries `scripts/install-tools.sh k8s kubectl` puts into .tools/k8s/bin) for a benchmark in
// another module (load-tests, `make bench-tenants-kube`), which cannot import the e2e tests'
// internal/apiserver: it writes an admin kubeconfig, prints its path on one line, and stops both
// processes on SIGTERM or Ctrl-C.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/weighstation/weighstation/control-plane/internal/apiserver"
)

func main() {
	dir := flag.String("dir", "", "where etcd's data, the logs and the kubeconfig go (required)")
	bin := flag.String("k8s-bin", ".tools/k8s/bin", "folder holding etcd and kube-apiserver")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "weighstation-kubeapi: -dir is required")
		os.Exit(2)
	}
	api, err := apiserver.Start(*dir, filepath.Join(*bin, "kube-apiserver"), filepath.Join(*bin, "etcd"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-kubeapi:", err)
		os.Exit(1)
	}
	defer api.Stop()
	kubeconfig, err := api.Kubeconfig("admin", apiserver.AdminToken)
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-kubeapi:", err)
		return
	}
	fmt.Println("kubeconfig=" + kubeconfig)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
}
