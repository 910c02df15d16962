package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/memlimit"
	"github.com/weighstation/weighstation/control-plane/internal/quota"
	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

// quotaCmd runs the quota service: each gateway replica's filter posts its global tenants'
// usage to it about once a second and gets back its share of each limit (docs/architecture.md).
// The replicas' reports live in Redis or Valkey: one server, a Sentinel-watched primary or a
// Cluster (docs/operations.md, "The quota store").
func quotaCmd(args []string) int {
	fs := flag.NewFlagSet("quota", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve "+quota.SharesPath+" and /healthz on")
	mode := fs.String("redis-mode", string(redisclient.Single), "how the store runs: single (one server), sentinel (a primary watched by Sentinel) or cluster (Redis Cluster)")
	addrs := fs.String("redis", "127.0.0.1:6379", "host:port, comma-separated: the server (single), the sentinels (sentinel) or seed nodes (cluster)")
	master := fs.String("redis-master", "", "the name the sentinels monitor the primary by (sentinel mode)")
	user := fs.String("redis-username", "", "ACL user on the data nodes (password from REDIS_PASSWORD or --redis-password-file)")
	passwordFile := fs.String("redis-password-file", "", "file holding the data nodes' password (or REDIS_PASSWORD)")
	sentinelUser := fs.String("redis-sentinel-username", "", "ACL user on the sentinels (password from REDIS_SENTINEL_PASSWORD or --redis-sentinel-password-file)")
	sentinelPasswordFile := fs.String("redis-sentinel-password-file", "", "file holding the sentinels' own password (or REDIS_SENTINEL_PASSWORD)")
	useTLS := fs.Bool("redis-tls", false, "TLS to every node (and to the sentinels)")
	tlsCA := fs.String("redis-tls-ca", "", "PEM file of the CA certificates that sign the servers' (default: the system's roots)")
	tlsCert := fs.String("redis-tls-cert", "", "PEM client certificate, for servers that require one (with --redis-tls-key)")
	tlsKey := fs.String("redis-tls-key", "", "PEM key of --redis-tls-cert")
	tlsServerName := fs.String("redis-tls-server-name", "", "name the servers' certificates carry (default: the host dialled)")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	opts := redisclient.Options{
		Mode: redisclient.Mode(*mode), Addrs: splitAddrs(*addrs), MasterName: *master,
		Username: *user, SentinelUsername: *sentinelUser,
		TLS: redisclient.TLS{Enabled: *useTLS, CAFile: *tlsCA, CertFile: *tlsCert, KeyFile: *tlsKey, ServerName: *tlsServerName},
	}
	var err error
	if opts.Password, err = secret("REDIS_PASSWORD", "--redis-password-file", *passwordFile); err == nil {
		opts.SentinelPassword, err = secret("REDIS_SENTINEL_PASSWORD", "--redis-sentinel-password-file", *sentinelPasswordFile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation quota:", err)
		return 2
	}
	rdb, err := redisclient.Open(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation quota:", err)
		return 2
	}
	defer rdb.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	memlimit.Apply(log)
	svc := &quota.Service{Store: quota.NewStore(rdb), Log: log, Now: time.Now}
	mux := http.NewServeMux()
	mux.Handle(quota.SharesPath, svc)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		h, err := redisclient.Ping(ctx, rdb)
		if err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if len(h.Down) > 0 {
			fmt.Fprintln(w, "ok, but the limits on these cluster primaries' slots fall back:", strings.Join(h.Down, "; "))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("quota service listening", "addr", *listen, "redis-mode", opts.Mode, "redis", opts.Addrs, "tls", opts.TLS.Enabled)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("quota service", "err", err)
		return 1
	}
	return 0
}

// splitAddrs: the comma-separated --redis, blanks around each dropped.
func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// secret is a password from the environment variable env or from file (a mounted Secret; one
// trailing newline dropped), never from a flag, where ps would show it. Both at once is refused:
// which one wins would be a guess.
func secret(env, fileFlag, file string) (string, error) {
	fromEnv := os.Getenv(env)
	if file == "" {
		return fromEnv, nil
	}
	if fromEnv != "" {
		return "", fmt.Errorf("both %s and %s are set: give the password one way", env, fileFlag)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fileFlag, err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", fmt.Errorf("%s %s is empty", fileFlag, file)
	}
	return pw, nil
}
