package localstack

import (
	"fmt"
	"os"
	"path/filepath"
)

// StartQuotaService starts only the quota store, in cfg.RedisMode as Start would run it (TLS and
// passwords in sentinel and cluster mode), and the quota service on it, at cfg.Ports.Redis and
// cfg.Ports.Quota: what a benchmark of the quota service needs, without the brokers, the control
// plane or a gateway in the way. Stop stops them.
func StartQuotaService(cfg Config) (*Stack, error) {
	s := &Stack{cfg: cfg, logDir: filepath.Join(cfg.WorkDir, "logs")}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		return nil, err
	}
	var err error
	if s.tls, err = newTLSMaterial(filepath.Join(cfg.WorkDir, "tls")); err != nil {
		return nil, fmt.Errorf("issuing the local certificates: %w", err)
	}
	if err := s.startRedisStore(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("redis (%s): %w (logs in %s)", cfg.RedisModeOrDefault(), err, s.logDir)
	}
	if err := s.startQuota(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("quota service: %w (logs in %s)", err, s.logDir)
	}
	return s, nil
}

// RedisProcessIDs are the store's processes: its data nodes (the one server in single mode) and
// its sentinels, whose CPU time is the store's cost.
func (s *Stack) RedisProcessIDs() []int {
	nodes := s.RedisNodes
	if len(nodes) == 0 && s.Redis != nil {
		nodes = []*process{s.Redis}
	}
	var pids []int
	for _, p := range append(append([]*process(nil), nodes...), s.Sentinels...) {
		pids = append(pids, p.PID())
	}
	return pids
}
