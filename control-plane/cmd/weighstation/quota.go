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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weighstation/weighstation/control-plane/internal/quota"
)

// quotaCmd runs the quota service: each gateway replica's filter posts its global tenants'
// usage to it about once a second and gets back its share of each limit (docs/architecture.md).
func quotaCmd(args []string) int {
	fs := flag.NewFlagSet("quota", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve "+quota.SharesPath+" and /healthz on")
	redisAddr := fs.String("redis", "127.0.0.1:6379", "Redis or Valkey address (password from REDIS_PASSWORD)")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, Password: os.Getenv("REDIS_PASSWORD"), DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	svc := &quota.Service{Store: quota.NewStore(rdb), Log: log, Now: time.Now}
	mux := http.NewServeMux()
	mux.Handle(quota.SharesPath, svc)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := rdb.Ping(ctx).Err(); err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
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
	log.Info("quota service listening", "addr", *listen, "redis", *redisAddr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("quota service", "err", err)
		return 1
	}
	return 0
}
