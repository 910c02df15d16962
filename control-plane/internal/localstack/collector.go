package localstack

import (
	"fmt"
	"os"
	"path/filepath"
)

// collectorConfig has the OpenTelemetry Collector receive OTLP/HTTP on its port and write each
// request it accepted to a file, one JSON line per request, flushed every 100 ms. Its own
// telemetry is off: it would bind :8888.
const collectorConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file:
    path: %s
    format: json
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file]
`

// startCollector starts a real OpenTelemetry Collector (.tools/bin/otelcol, built from
// tools/otelcol) for the control plane's decision log (WithCollector).
func (s *Stack) startCollector() error {
	dir := filepath.Join(s.cfg.WorkDir, "otelcol")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, collectorConfig, s.cfg.Ports.OTLP, s.CollectorOutput()), 0o644); err != nil {
		return err
	}
	p, err := s.startProcess("otelcol", nil, s.tool("otelcol"), "--config", conf)
	if err != nil {
		return err
	}
	s.Collector = p
	s.procs = append(s.procs, p)
	return waitTCP(p, addr(s.cfg.Ports.OTLP), startTimeout)
}

// CollectorOutput is the file the Collector writes what it received to: one OTLP/JSON
// ExportLogsServiceRequest per line.
func (s *Stack) CollectorOutput() string {
	return filepath.Join(s.cfg.WorkDir, "otelcol", "logs.jsonl")
}

// collectorEndpoint is the Collector's OTLP/HTTP logs endpoint.
func (s *Stack) collectorEndpoint() string {
	return "http://" + addr(s.cfg.Ports.OTLP) + "/v1/logs"
}
