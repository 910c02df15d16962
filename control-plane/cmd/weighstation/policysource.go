package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/weighstation/weighstation/control-plane/internal/controller"
	"github.com/weighstation/weighstation/control-plane/internal/kubesource"
	"github.com/weighstation/weighstation/control-plane/internal/usage"
	"github.com/weighstation/weighstation/control-plane/internal/watch"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// policySource is where `serve` takes policies from: a directory (the default) or the
// LimitPolicy and GatewayDefaults objects of the Kubernetes API.
type policySource struct {
	kind       string
	dir        string
	debounce   time.Duration
	poll       time.Duration
	kubeconfig string
	namespace  string
	identity   string
	election   kubesource.Election
}

func (p *policySource) flags(fs *flag.FlagSet) {
	fs.StringVar(&p.kind, "policy-source", "files", "files (the YAML of --policy-dir) or kubernetes (LimitPolicy and GatewayDefaults objects)")
	fs.StringVar(&p.dir, "policy-dir", envOr("POLICY_DIR", "policies"), "directory of policy YAML files (--policy-source=files)")
	fs.DurationVar(&p.debounce, "debounce", 200*time.Millisecond, "quiet time after a policy file change before reloading")
	fs.DurationVar(&p.poll, "poll", 5*time.Second, "re-read interval backing up the file watcher")
	fs.StringVar(&p.kubeconfig, "kubeconfig", "", "kubeconfig file (--policy-source=kubernetes; default: the pod's service account)")
	fs.StringVar(&p.namespace, "platform-namespace", os.Getenv("POD_NAMESPACE"), "the platform's namespace: its LimitPolicies need no grant, and the status Lease lives there (--policy-source=kubernetes; default $POD_NAMESPACE)")
	host, _ := os.Hostname()
	fs.StringVar(&p.identity, "leader-identity", envOr("POD_NAME", fmt.Sprintf("%s-%d", host, os.Getpid())), "this replica's name in the status Lease")
	fs.StringVar(&p.election.LeaseName, "leader-lease", "weighstation-policy-status", "the Lease replicas take turns on to write policy status")
	fs.DurationVar(&p.election.LeaseDuration, "leader-lease-duration", 15*time.Second, "how long a replica that stopped renewing keeps the Lease")
	fs.DurationVar(&p.election.RenewDeadline, "leader-renew-deadline", 10*time.Second, "how long the holder tries to renew before giving the Lease up")
	fs.DurationVar(&p.election.RetryPeriod, "leader-retry-period", 2*time.Second, "how often replicas try for the Lease")
}

// check reports a flag combination that cannot work.
func (p *policySource) check() error {
	switch p.kind {
	case "files":
		return nil
	case "kubernetes":
		if p.namespace == "" {
			return fmt.Errorf("--policy-source=kubernetes needs --platform-namespace (or $POD_NAMESPACE)")
		}
		// As client-go's leader election requires (it would panic at the first try).
		e := p.election
		if e.RetryPeriod <= 0 || e.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(e.RetryPeriod)) || e.LeaseDuration <= e.RenewDeadline {
			return fmt.Errorf("--leader-lease-duration (%s) must exceed --leader-renew-deadline (%s), which must exceed %.1f × --leader-retry-period (%s)",
				e.LeaseDuration, e.RenewDeadline, leaderelection.JitterFactor, e.RetryPeriod)
		}
		return nil
	}
	return fmt.Errorf("--policy-source %q: use files or kubernetes", p.kind)
}

// describe names the source in /status and the logs.
func (p *policySource) describe() string {
	if p.kind == "kubernetes" {
		return "kubernetes: LimitPolicy, GatewayDefaults"
	}
	return p.dir
}

// start loads the first set and returns what keeps it current until ctx ends.
func (p *policySource) start(ctx context.Context, ctrl *controller.Controller, server *xds.Server, gateways func(context.Context) ([]xds.NodeStatus, error),
	summary func(string, time.Time) usage.Summary, log *slog.Logger) (func() error, error) {
	if p.kind == "files" {
		_ = ctrl.Reload() // an invalid start is reported in /status and /readyz; the watch retries
		return func() error { return watch.Dir(ctx, p.dir, p.debounce, p.poll, func() { _ = ctrl.Reload() }, log) }, nil
	}
	cfg, err := p.restConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	src, err := kubesource.New(kubesource.Config{REST: cfg, PlatformNamespace: p.namespace, Identity: p.identity,
		Election: p.election, Controller: ctrl, Gateways: gateways, Usage: summary, Log: log})
	if err != nil {
		return nil, err
	}
	server.OnNodeChange(src.Wake)
	return func() error { return src.Run(ctx) }, nil
}

func (p *policySource) restConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig) // "": the pod's service account
	if err != nil {
		return nil, err
	}
	// client-go's default (5/s, bursts of 10) would queue the status of a burst of applies
	// behind each other; the writes are one patch per object whose conditions changed.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}
