// Package redisclient turns the quota service's store settings (its --redis-* flags, or the
// chart's quota.redis values rendered into them) into go-redis's universal client: one server,
// a primary watched by Sentinel, or a Cluster, each with passwords and TLS.
package redisclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Mode is how the store is deployed.
type Mode string

const (
	Single   Mode = "single"   // one server (or a proxy in front of several)
	Sentinel Mode = "sentinel" // a primary and its replicas, watched by Sentinel
	Cluster  Mode = "cluster"  // Redis Cluster: keys spread over primaries by hash slot
)

// Modes lists every mode, in the order the flags' help gives them.
var Modes = []Mode{Single, Sentinel, Cluster}

// timeout bounds a dial, a read and a write: a store slower than this is down as far as the
// quota service is concerned (it answers within storeDeadline, and replicas fall back).
const timeout = time.Second

// Options say where the store is and how to reach it. Each error names the flag that sets the
// field (the chart renders its values into those flags).
type Options struct {
	Mode Mode
	// Addrs: the server (single), the sentinels (sentinel) or seed nodes (cluster).
	Addrs []string
	// MasterName is the name the sentinels monitor the primary by (sentinel only).
	MasterName string
	// Username and Password authenticate to the data nodes (ACL user, or only the password).
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the sentinels, which may have
	// credentials of their own (sentinel only).
	SentinelUsername, SentinelPassword string
	TLS                                TLS
}

// TLS is the client side of TLS to every node (and, in sentinel mode, to the sentinels too:
// go-redis dials both with one configuration).
type TLS struct {
	Enabled bool
	// CAFile holds the certificates that sign the servers' (none: the system's roots).
	CAFile string
	// CertFile and KeyFile are a client certificate, for servers with tls-auth-clients.
	CertFile, KeyFile string
	// ServerName is the name the servers' certificates must carry (none: the host dialled).
	ServerName string
}

// Check reports the first setting that does not fit the others.
func (o Options) Check() error {
	switch o.Mode {
	case Single, Sentinel, Cluster:
	default:
		return fmt.Errorf("--redis-mode=%q: want one of %s", o.Mode, modeList())
	}
	if len(o.Addrs) == 0 {
		return fmt.Errorf("--redis: no address given (%s)", o.addrsMean())
	}
	for i, a := range o.Addrs {
		if !validHostPort(a) {
			return fmt.Errorf("--redis: address %d %q is not host:port (%s)", i+1, a, o.addrsMean())
		}
	}
	if o.Mode == Single && len(o.Addrs) > 1 {
		return fmt.Errorf("--redis: %d addresses in --redis-mode=single, which takes one: give --redis-mode=sentinel for sentinels or --redis-mode=cluster for cluster seeds", len(o.Addrs))
	}
	if o.Mode == Sentinel && o.MasterName == "" {
		return errors.New("--redis-mode=sentinel needs --redis-master: the name the sentinels monitor the primary by")
	}
	if o.Mode != Sentinel {
		switch {
		case o.MasterName != "":
			return fmt.Errorf("--redis-master is for --redis-mode=sentinel only, not %s", o.Mode)
		case o.SentinelUsername != "":
			return fmt.Errorf("--redis-sentinel-username is for --redis-mode=sentinel only, not %s", o.Mode)
		case o.SentinelPassword != "":
			return fmt.Errorf("a Sentinel password (REDIS_SENTINEL_PASSWORD or --redis-sentinel-password-file) is for --redis-mode=sentinel only, not %s", o.Mode)
		}
	}
	if o.Username != "" && o.Password == "" {
		return errors.New("--redis-username needs a password (REDIS_PASSWORD or --redis-password-file)")
	}
	if o.SentinelUsername != "" && o.SentinelPassword == "" {
		return errors.New("--redis-sentinel-username needs a password (REDIS_SENTINEL_PASSWORD or --redis-sentinel-password-file)")
	}
	return o.TLS.check()
}

func (t TLS) check() error {
	if !t.Enabled {
		for _, f := range []struct{ flag, value string }{
			{"--redis-tls-ca", t.CAFile}, {"--redis-tls-cert", t.CertFile}, {"--redis-tls-key", t.KeyFile}, {"--redis-tls-server-name", t.ServerName},
		} {
			if f.value != "" {
				return fmt.Errorf("%s needs --redis-tls", f.flag)
			}
		}
		return nil
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("--redis-tls-cert and --redis-tls-key go together: a client certificate needs its key")
	}
	return nil
}

// Universal is go-redis's options for o, its TLS files read: NewUniversalClient then picks the
// client of o's mode.
func (o Options) Universal() (*redis.UniversalOptions, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	u := &redis.UniversalOptions{
		Addrs:       o.Addrs,
		Username:    o.Username,
		Password:    o.Password,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
	}
	switch o.Mode {
	case Sentinel:
		u.MasterName = o.MasterName
		u.SentinelUsername = o.SentinelUsername
		u.SentinelPassword = o.SentinelPassword
	case Cluster:
		// One seed address would otherwise make a single-node client.
		u.IsClusterMode = true
		// No retry within a pipeline: go-redis retries a pipeline's failed commands after a
		// backoff, and when the context ends during it marks every command failed, those the
		// other primaries answered too. Without it a lost primary costs only its own limits,
		// and a command moved elsewhere is answered at the replica's next report.
		u.MaxRedirects = -1
	}
	if o.TLS.Enabled {
		cfg, err := o.TLS.Config()
		if err != nil {
			return nil, err
		}
		u.TLSConfig = cfg
	}
	return u, nil
}

// Open returns the client of o's mode. It does not dial: the first command does.
func Open(o Options) (redis.UniversalClient, error) {
	u, err := o.Universal()
	if err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(u), nil
}

// Config is the TLS client configuration, its files read.
func (t TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--redis-tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--redis-tls-ca %s: no PEM certificate in it", t.CAFile)
		}
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--redis-tls-cert %s with --redis-tls-key %s: %w", t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func (o Options) addrsMean() string {
	switch o.Mode {
	case Sentinel:
		return "the sentinels' host:port, comma-separated"
	case Cluster:
		return "host:port of one or more cluster nodes, comma-separated"
	}
	return "host:port of the server"
}

func modeList() string {
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// validHostPort: a non-empty host and a port of 1-65535 ([v6]:port allowed).
func validHostPort(a string) bool {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n <= 65535
}
