package localstack

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
)

// The quota store in sentinel and cluster mode runs as a platform team runs it: TLS with client
// certificates on every connection (the broker certificates of TLSDir: broker.crt serves,
// gateway-client.crt is every client's, the quota service's, the replicas' and the sentinels'),
// a password on the data nodes and an ACL user of their own on the sentinels. Single mode stays
// the plain server `make run` always had.
const (
	RedisPassword         = "quota-store-secret"
	RedisSentinelUser     = "watcher"
	RedisSentinelPassword = "watcher-secret"
	// RedisMasterName is the name the sentinels monitor the primary by.
	RedisMasterName = "weighstation-quota"
	// redisClusterNodes: three primaries and a replica each.
	redisClusterNodes = 6
	sentinels         = 3
	// sentinelDataNodes: a primary and one replica.
	sentinelDataNodes = 2
)

// redisPorts is how many consecutive ports, from Ports.Redis, the store of mode takes: the
// data nodes, then the sentinels (sentinel) or the cluster bus of each node (cluster).
func redisPorts(mode redisclient.Mode) int {
	switch mode {
	case redisclient.Sentinel:
		return sentinelDataNodes + sentinels
	case redisclient.Cluster:
		return 2 * redisClusterNodes
	}
	return 1
}

// RedisModeOrDefault is the quota store's mode: single unless Config.RedisMode says otherwise.
func (c Config) RedisModeOrDefault() redisclient.Mode {
	if c.RedisMode == "" {
		return redisclient.Single
	}
	return c.RedisMode
}

// RedisDataPorts are the ports of the store's data nodes: the primary first in sentinel mode
// (until a failover), the nodes in the order the cluster was created from in cluster mode.
func (s *Stack) RedisDataPorts() []int {
	n := map[redisclient.Mode]int{redisclient.Single: 1, redisclient.Sentinel: sentinelDataNodes, redisclient.Cluster: redisClusterNodes}[s.cfg.RedisModeOrDefault()]
	ports := make([]int, n)
	for i := range ports {
		ports[i] = s.cfg.Ports.Redis + i
	}
	return ports
}

// startRedisStore starts the store of the configured mode and waits until it serves.
func (s *Stack) startRedisStore() error {
	switch s.cfg.RedisModeOrDefault() {
	case redisclient.Sentinel:
		return s.startRedisSentinel()
	case redisclient.Cluster:
		return s.startRedisCluster()
	}
	return s.StartRedis()
}

// redisTLSArgs make a node listen on port with TLS only and reach other nodes over TLS with
// the client certificate.
func (s *Stack) redisTLSArgs(port int) []string {
	tls := func(name string) string { return filepath.Join(s.tls.dir, name) }
	return []string{"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", tls("broker.crt"), "--tls-key-file", tls("broker.key"), "--tls-ca-cert-file", tls("broker-ca.crt"),
		"--tls-client-cert-file", tls("gateway-client.crt"), "--tls-client-key-file", tls("gateway-client.key"),
		"--tls-auth-clients", "yes", "--tls-replication", "yes"}
}

// startRedisNode starts data node i (redis-i) with args beyond the common ones.
func (s *Stack) startRedisNode(i int, args ...string) (*process, error) {
	port := s.cfg.Ports.Redis + i
	// Afresh each start: the reports live seconds, and a cluster is created from empty nodes.
	dir := filepath.Join(s.cfg.WorkDir, "redis-"+strconv.Itoa(i))
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// No delay before a replica's first (diskless) sync: until it has one it cannot be promoted.
	all := append([]string{"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0",
		"--requirepass", RedisPassword, "--masterauth", RedisPassword}, s.redisTLSArgs(port)...)
	p, err := s.startProcess("redis-"+strconv.Itoa(i), nil, s.tool("redis-server"), append(all, args...)...)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	s.RedisNodes = append(s.RedisNodes, p)
	return p, waitTCP(p, addr(port), startTimeout)
}

// sentinelConfig: a sentinel monitoring the primary over TLS, quorum 2 of 3, which calls a
// primary down after a second of silence (Sentinel's default is 30 s: this is the figure a
// platform team tunes, and the one the quota store's failover time follows).
var sentinelConfig = `bind 127.0.0.1
port 0
tls-port %[1]d
tls-cert-file %[2]s/broker.crt
tls-key-file %[2]s/broker.key
tls-ca-cert-file %[2]s/broker-ca.crt
tls-client-cert-file %[2]s/gateway-client.crt
tls-client-key-file %[2]s/gateway-client.key
tls-auth-clients yes
tls-replication yes
dir %[3]s
user default off
user %[4]s on >%[5]s ~* &* +@all
sentinel sentinel-user %[4]s
sentinel sentinel-pass %[5]s
sentinel monitor %[6]s 127.0.0.1 %[7]d 2
sentinel auth-pass %[6]s %[8]s
sentinel down-after-milliseconds %[6]s 1000
sentinel failover-timeout %[6]s 10000
sentinel parallel-syncs %[6]s 1
`

// startRedisSentinel starts a primary, its replica and three sentinels, and waits until every
// sentinel sees the replica and the other sentinels (before that a failover could not happen).
func (s *Stack) startRedisSentinel() error {
	p := s.cfg.Ports
	primary, err := s.startRedisNode(0)
	if err != nil {
		return err
	}
	s.Redis = primary
	if _, err := s.startRedisNode(1, "--replicaof", "127.0.0.1", strconv.Itoa(p.Redis)); err != nil {
		return err
	}
	for j := range sentinels {
		port := p.Redis + sentinelDataNodes + j
		dir := filepath.Join(s.cfg.WorkDir, "sentinel-"+strconv.Itoa(j))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		conf := filepath.Join(dir, "sentinel.conf") // rewritten by the sentinel as it learns
		body := fmt.Sprintf(sentinelConfig, port, s.tls.dir, dir, RedisSentinelUser, RedisSentinelPassword, RedisMasterName, p.Redis, RedisPassword)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return err
		}
		sp, err := s.startProcess("sentinel-"+strconv.Itoa(j), nil, s.tool("redis-sentinel"), conf)
		if err != nil {
			return err
		}
		s.procs = append(s.procs, sp)
		s.Sentinels = append(s.Sentinels, sp)
		if err := waitTCP(sp, addr(port), startTimeout); err != nil {
			return err
		}
	}
	if err := s.waitReplicasSynced(1); err != nil {
		return err
	}
	return s.waitSentinelsSettled()
}

// waitReplicasSynced waits until want data nodes are replicas whose link to their primary is
// up (their first sync done): before that a replica cannot take over.
func (s *Stack) waitReplicasSynced(want int) error {
	ctx := context.Background()
	tlsCfg, err := s.redisClientOptions().TLS.Config()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		synced, last := 0, ""
		for _, port := range s.RedisDataPorts() {
			c := redis.NewClient(&redis.Options{Addr: addr(port), Password: RedisPassword, TLSConfig: tlsCfg})
			info, err := c.Info(ctx, "replication").Result()
			c.Close()
			if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
				synced++
			} else if err != nil || strings.Contains(info, "role:slave") {
				last = fmt.Sprintf("%d: %v %s", port, err, info)
			}
		}
		if synced >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d replicas synced with their primary within %s: %s", synced, want, startTimeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Stack) waitSentinelsSettled() error {
	ctx := context.Background()
	tlsCfg, err := s.redisClientOptions().TLS.Config()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	last := ""
	for j := range sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr(s.cfg.Ports.Redis + sentinelDataNodes + j),
			Username: RedisSentinelUser, Password: RedisSentinelPassword, TLSConfig: tlsCfg})
		for {
			m, err := sc.Master(ctx, RedisMasterName).Result()
			if err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == strconv.Itoa(sentinels-1) {
				break
			}
			last = fmt.Sprintf("sentinel-%d: %v %v", j, m, err)
			if time.Now().After(deadline) {
				sc.Close()
				return fmt.Errorf("the sentinels did not find the replica and each other within %s: %s", startTimeout, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
		sc.Close()
	}
	return nil
}

// startRedisCluster starts six nodes, each its cluster bus on the port redisClusterNodes
// above its own, makes them a cluster of three primaries with a replica each (redis-cli
// --cluster create) and waits until every node sees it whole. A primary is failed over after
// a second of silence (cluster-node-timeout; Redis's default is 15 s).
func (s *Stack) startRedisCluster() error {
	p := s.cfg.Ports
	var nodes []string
	for i := range redisClusterNodes {
		if _, err := s.startRedisNode(i, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(p.Redis+redisClusterNodes+i),
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000", "--tls-cluster", "yes",
			// A lost primary's slots go unserved until its replica takes them, and nothing else: the
			// others keep answering their limits (with the default, yes, the whole cluster refuses).
			"--cluster-require-full-coverage", "no"); err != nil {
			return err
		}
		nodes = append(nodes, addr(p.Redis+i))
	}
	s.Redis = s.RedisNodes[0]
	tls := func(name string) string { return filepath.Join(s.tls.dir, name) }
	args := append([]string{"--tls", "--cacert", tls("broker-ca.crt"), "--cert", tls("gateway-client.crt"), "--key", tls("gateway-client.key"),
		"--no-auth-warning", "-a", RedisPassword, "--cluster", "create"}, nodes...)
	create := exec.Command(s.tool("redis-cli"), append(args, "--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	ctx := context.Background()
	opts := s.redisClientOptions()
	tlsCfg, err := opts.TLS.Config()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n, Password: RedisPassword, TLSConfig: tlsCfg})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:6") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return fmt.Errorf("cluster node %s not ok within %s: %v %s", n, startTimeout, err, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.Close()
	}
	return s.waitReplicasSynced(redisClusterNodes / 2)
}

// redisClientOptions is how the quota service reaches the store (RedisPassword and
// RedisSentinelPassword aside: they go in the environment and a file).
func (s *Stack) redisClientOptions() redisclient.Options {
	p := s.cfg.Ports
	mode := s.cfg.RedisModeOrDefault()
	o := redisclient.Options{Mode: mode, Addrs: []string{addr(p.Redis)}}
	if mode == redisclient.Single {
		return o
	}
	tls := func(name string) string { return filepath.Join(s.tls.dir, name) }
	o.TLS = redisclient.TLS{Enabled: true, CAFile: tls("broker-ca.crt"), CertFile: tls("gateway-client.crt"), KeyFile: tls("gateway-client.key"), ServerName: "localhost"}
	o.Addrs = nil
	switch mode {
	case redisclient.Sentinel:
		o.MasterName, o.SentinelUsername = RedisMasterName, RedisSentinelUser
		for j := range sentinels {
			o.Addrs = append(o.Addrs, addr(p.Redis+sentinelDataNodes+j))
		}
	case redisclient.Cluster:
		// Two seeds: the client learns the rest from either.
		o.Addrs = []string{addr(p.Redis), addr(p.Redis + 1)}
	}
	return o
}

// quotaStoreArgs are the quota service's --redis-* flags and environment for the store.
func (s *Stack) quotaStoreArgs() (args, env []string, err error) {
	o := s.redisClientOptions()
	args = []string{"--redis-mode", string(o.Mode), "--redis", strings.Join(o.Addrs, ",")}
	if o.Mode == redisclient.Single {
		return args, nil, nil
	}
	env = []string{"REDIS_PASSWORD=" + RedisPassword}
	args = append(args, "--redis-tls", "--redis-tls-ca", o.TLS.CAFile, "--redis-tls-cert", o.TLS.CertFile,
		"--redis-tls-key", o.TLS.KeyFile, "--redis-tls-server-name", o.TLS.ServerName)
	if o.Mode == redisclient.Sentinel {
		// The sentinels' password from a file, as the chart mounts it from a Secret.
		file := filepath.Join(s.cfg.WorkDir, "redis-sentinel-password")
		if err := os.WriteFile(file, []byte(RedisSentinelPassword+"\n"), 0o600); err != nil {
			return nil, nil, err
		}
		args = append(args, "--redis-master", o.MasterName, "--redis-sentinel-username", o.SentinelUsername,
			"--redis-sentinel-password-file", file)
	}
	return args, env, nil
}

// RedisTLS is the TLS configuration with which a test reaches the store's nodes and sentinels
// (sentinel and cluster mode), as the quota service does.
func (s *Stack) RedisTLS() (*tls.Config, error) { return s.redisClientOptions().TLS.Config() }
