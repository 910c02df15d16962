package e2e

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

func addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

func gatewayNATS(t *testing.T, user, pass string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return connectNATS(t, ports.NATS, user, pass, opts...)
}

// directNATS connects to nats-server itself as the baseline user: tenants' users are
// proxy_required, so a test reads what the gateway let through as a user of no tenant.
func directNATS(t *testing.T) *nats.Conn {
	t.Helper()
	return connectNATS(t, ports.NATSUpstream, localstack.BaselineNATSUser, localstack.BaselineNATSUser+"-secret")
}

func connectNATS(t *testing.T, port int, user, pass string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if user != "" {
		opts = append(opts, nats.UserInfo(user, pass))
	}
	opts = append(opts, nats.Timeout(5*time.Second))
	nc, err := nats.Connect("nats://"+addr(port), opts...)
	if err != nil {
		t.Fatalf("connecting to NATS on %d as %q: %v", port, user, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

var promLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// metric reads one weighstation metric from Envoy's /stats/prometheus; labels must all match.
// A metric the filter has not defined yet reads as 0.
func metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := metricSeries(t, name, labels)
	return v
}

// metricTotal sums every series of a metric whose labels match (e.g. refusals of all reasons).
func metricTotal(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	_, total := metricSeries(t, name, labels)
	return total
}

// metricSeries returns the first matching series' value and the sum of all matching ones.
func metricSeries(t *testing.T, name string, labels map[string]string) (first, total float64) {
	t.Helper()
	return metricSeriesAt(t, ports.Admin, name, labels)
}

// metricSeriesAt is metricSeries from the Envoy whose admin listens on adminPort.
func metricSeriesAt(t *testing.T, adminPort int, name string, labels map[string]string) (first, total float64) {
	t.Helper()
	resp, err := http.Get("http://" + addr(adminPort) + "/stats/prometheus")
	if err != nil {
		t.Fatalf("reading Envoy stats: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found := false
	for sc.Scan() {
		m := promLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != name || !labelsMatch(m[2], labels) {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("metric %s: %v", name, err)
		}
		if !found {
			first, found = v, true
		}
		total += v
	}
	return first, total
}

func labelsMatch(set string, want map[string]string) bool {
	for k, v := range want {
		if !strings.Contains(set, fmt.Sprintf("%s=%q", k, v)) {
			return false
		}
	}
	return true
}

// peakGauge samples one of the filter's gauges from Envoy's admin endpoint, as often as it
// answers, until stop is called; stop returns the highest value seen and how many samples were
// taken. Gauges are summed across Envoy's workers, so the peak is the tenant's, not a worker's.
type peakGauge struct {
	stopping chan struct{}
	done     chan struct{}
	peak     float64
	samples  int
	err      error
}

// samplePeak starts sampling metric{protocol, tenant} (a gauge the filter defines per tenant).
func samplePeak(t *testing.T, metric, protocol, tenant string) *peakGauge {
	t.Helper()
	stat := fmt.Sprintf("wasmcustom.%s.protocol.%s.tenant.%s", metric, protocol, tenant)
	u := "http://" + addr(ports.Admin) + "/stats?filter=" + url.QueryEscape("^"+regexp.QuoteMeta(stat)+"$")
	g := &peakGauge{stopping: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for {
			select {
			case <-g.stopping:
				return
			default:
			}
			v, err := readStat(u, stat)
			if err != nil {
				g.err = err
				return
			}
			g.peak = max(g.peak, v)
			g.samples++
		}
	}()
	return g
}

// stop ends the sampling and returns the peak; it fails the test if sampling failed or took
// too few samples to mean anything.
func (g *peakGauge) stop(t *testing.T) float64 {
	t.Helper()
	close(g.stopping)
	<-g.done
	if g.err != nil {
		t.Fatalf("sampling a gauge: %v", g.err)
	}
	if g.samples < 20 {
		t.Fatalf("only %d gauge samples: the peak means nothing", g.samples)
	}
	return g.peak
}

// readStat reads one stat from /stats (text: "name: value"); a stat not defined yet reads 0.
func readStat(u, stat string) (float64, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, stat+": "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, nil
}

// eventually polls cond until it holds or timeout passes, and reports how long it took.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, timeout)
	return 0
}

func writePolicy(t *testing.T, name, content string) {
	t.Helper()
	path := filepath.Join(policyDir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func removePolicy(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(policyDir, name)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

func activeVersion(t *testing.T) string {
	t.Helper()
	st, err := stack.ControlPlaneStatus()
	if err != nil || st.Active == nil {
		t.Fatalf("control plane status: %v", err)
	}
	return st.Active.Version
}

// publishAndReceive publishes n messages on subject through nc and waits for a direct
// subscriber to receive them all.
func publishAndReceive(t *testing.T, nc *nats.Conn, subject string, n int) {
	t.Helper()
	sub := directNATS(t)
	got, err := sub.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.Flush()
	for range n {
		if err := nc.Publish(subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := got.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("message %d of %d not delivered: %v", i+1, n, err)
		}
	}
}

// certPool trusts the certificates of a PEM file.
func certPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("%s holds no certificate", file)
	}
	return pool
}

// ecdsVersion is the version of the filter configuration (ECDS resource) name that Envoy runs,
// from its admin config_dump.
func ecdsVersion(t *testing.T, name string) string { return ecdsVersionAt(t, ports.Admin, name) }

// ecdsVersionAt is ecdsVersion of the Envoy whose admin listens on adminPort.
func ecdsVersionAt(t *testing.T, adminPort int, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr(adminPort) + "/config_dump?resource=ecds_filters")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var dump struct {
		Configs []struct {
			VersionInfo string `json:"version_info"`
			EcdsFilter  struct {
				Name string `json:"name"`
			} `json:"ecds_filter"`
		} `json:"configs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dump); err != nil {
		t.Fatal(err)
	}
	for _, c := range dump.Configs {
		if c.EcdsFilter.Name == name {
			return c.VersionInfo
		}
	}
	t.Fatalf("Envoy runs no filter configuration %s", name)
	return ""
}
