package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/controller"
	"github.com/weighstation/weighstation/control-plane/internal/discovery"
	"github.com/weighstation/weighstation/control-plane/internal/kubesource"
	"github.com/weighstation/weighstation/control-plane/internal/memlimit"
	"github.com/weighstation/weighstation/control-plane/internal/quota"
	"github.com/weighstation/weighstation/control-plane/internal/status"
	"github.com/weighstation/weighstation/control-plane/internal/tenantfeed"
	"github.com/weighstation/weighstation/control-plane/internal/tlssecrets"
	"github.com/weighstation/weighstation/control-plane/internal/usage"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// maxClientMetrics bounds --client-metrics: each client is three series per tenant.
const maxClientMetrics = 100

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var source policySource
	source.flags(fs)
	xdsListen := fs.String("xds-listen", "127.0.0.1:18000", "ADS (gRPC) listen address")
	httpListen := fs.String("http-listen", "127.0.0.1:18080", "status and metrics listen address")
	replicasDNS := fs.String("count-replicas-dns", "", "count live gateway replicas as the addresses this name resolves to (a headless Service of the Envoy pods), for every control plane alike; default: the Envoys connected to this one")
	var g xds.Gateway
	fs.StringVar(&g.NATSListen, "nats-listen", "127.0.0.1:4222", "Envoy's NATS listener (empty: none)")
	fs.StringVar(&g.NATSUpstream, "nats-upstream", "127.0.0.1:14222", "nats-server address; several comma-separated seed servers of a cluster are balanced")
	g.KafkaListen = "127.0.0.1:9092"
	fs.Var(kafkaListen{&g}, "kafka-listen", "ADDRESS[,tls|,mtls][,upstream-tls]: Envoy's Kafka bootstrap listener (empty: none); options as for --kafka-broker")
	fs.Var(kafkaBrokers{&g.KafkaBrokers}, "kafka-broker",
		"UPSTREAM=LISTEN[=ADVERTISE][,tls|,mtls][,upstream-tls]: front a broker that advertises UPSTREAM with a gateway listener (repeatable); tls/mtls terminate TLS from clients, upstream-tls reaches the broker over TLS")
	fs.Var(kafkaClusters{&g.KafkaClusters}, "kafka-cluster", kafkaClusterUsage+": one listener kind of a Kafka cluster whose brokers the gateway discovers (repeatable): clients bootstrap at listen=, which forwards to the brokers bootstrap= lists; node n of FIRST-LAST has a listener at BROKERS' port + (n - FIRST)·stride, to its broker once a response has named it (until then no client is told of it); advertise= what clients are told for node FIRST (default BROKERS); options as for --kafka-broker")
	discoveryHold := fs.Duration("kafka-discovery-hold", 3*time.Second, "with --kafka-cluster: how long a starting control plane waits for the filters' reports to name the brokers they front before it publishes (an Envoy it served before would otherwise lose their upstreams)")
	fs.StringVar(&g.NATSPlainListen, "nats-plain-listen", "", "optional NATS listener with tcp_proxy alone, no filter (benchmark baseline)")
	fs.StringVar(&g.KafkaPlainListen, "kafka-plain-listen", "", "optional plaintext Kafka listener with tcp_proxy alone, no filter, to --kafka-upstream (benchmark baseline)")
	fs.Var(noopListeners{&g.NoopListeners}, "noop-listen", noopListenUsage+": optional plaintext listener whose filter is a module that does nothing (a proxy-wasm .wasm, or an Envoy dynamic module .so), ahead of tcp_proxy to the protocol's upstream (benchmark baseline: what having a filter costs; repeatable)")
	fs.Var(natsTLSListen{&g}, "nats-tls-listen", "ADDRESS[,mtls]: a TLS-first NATS listener beside --nats-listen (mtls: a client certificate is required)")
	fs.Var(addressList{&g.NATSAdvertise}, "nats-advertise", "HOST:PORT,...: the gateway addresses NATS clients of --nats-listen are told in INFO (connect_urls; the first is also host and port) in place of the servers' own: the Envoy Service, or every replica's address (default: none, and INFO names the listener)")
	fs.Var(addressList{&g.NATSTLSAdvertise}, "nats-tls-advertise", "HOST:PORT,...: as --nats-advertise, for the clients of --nats-tls-listen")
	fs.BoolVar(&g.NATSUpstreamTLS, "nats-upstream-tls", false, "reach nats-server over TLS from the first byte (its tls { handshake_first: true })")
	fs.StringVar(&g.TLSFiles.CertFile, "tls-cert-file", "", "PEM certificate chain TLS listeners present (re-read on change)")
	fs.StringVar(&g.TLSFiles.KeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&g.TLSFiles.ClientCAFile, "tls-client-ca-file", "", "PEM CA bundle that verifies client certificates on TLS listeners (mTLS)")
	fs.StringVar(&g.TLSFiles.UpstreamCAFile, "upstream-tls-ca-file", "", "PEM CA bundle that verifies brokers reached over TLS")
	fs.StringVar(&g.TLSFiles.UpstreamCertFile, "upstream-tls-cert-file", "", "PEM client certificate the gateway presents to brokers (optional)")
	fs.StringVar(&g.TLSFiles.UpstreamKeyFile, "upstream-tls-key-file", "", "PEM private key of --upstream-tls-cert-file")
	fs.StringVar(&g.UpstreamServerName, "upstream-tls-server-name", "", "name every broker certificate must carry, sent as SNI (default: each upstream's host)")
	tlsPoll := fs.Duration("tls-poll", 5*time.Second, "how often the TLS files are re-read for rotation")
	fs.StringVar(&g.KafkaUpstream, "kafka-upstream", "127.0.0.1:19092", "Kafka bootstrap broker address")
	bufferLimit := fs.Uint("buffer-limit-bytes", 32<<10, "per-connection buffer in Envoy before TCP backpressure; under sustained overload a held connection forwards in steps of about this much")
	fs.DurationVar(&g.SlowConsumerDeadline, "slow-consumer-deadline", 10*time.Second, "a client the gateway owes --buffer-limit-bytes of its own answers (refusals it does not read) is read no further; one that takes nothing of them for this long is closed as a slow consumer")
	fs.StringVar(&g.Wasm.File, "wasm-file", "", "path of the filter module Envoy loads")
	fs.StringVar(&g.Wasm.URL, "wasm-url", "", "URL Envoy fetches the filter module from (with --wasm-sha256)")
	fs.StringVar(&g.Wasm.SHA256, "wasm-sha256", "", "sha256 of the module at --wasm-url")
	serveWasm := fs.String("serve-wasm", "", "serve this filter module at "+WasmPath+" on the HTTP listener; Envoy fetches it (through `weighstation bootstrap --wasm-host`) pinned by its sha256, from --wasm-url if given")
	opsListen := fs.String("ops-listen", "", "listen address for the filter's usage reports and the operator's /usage, /usage/history and /decisions (which name clients and subjects), apart from /metrics and /status; default: --http-listen")
	reportAddress := fs.String("report-address", "", "host:port at which Envoy reaches this control plane's ops listener, where the filter reports usage and decisions (default: --ops-listen, else --http-listen, unless its host is unspecified; \"off\": no reports)")
	tenantFeed := fs.Bool("tenant-feed", true, "send a policy change of tenants alone, and the live replica count, to the filters as deltas they poll for (with reports); false: every change whole by ECDS")
	decisionsPerSecond := fs.Uint("decisions-per-second", 10, "decisions each filter worker keeps per tenant and reason each second (the rest are counted)")
	delayThreshold := fs.Duration("decision-delay-threshold", 100*time.Millisecond, "a message held at least this long is logged as a decision (0: delays are not)")
	peersList := fs.String("peers", "", "ADDRESS,...: the other control plane replicas' ops listeners, where no DNS name lists them (--peers-dns)")
	peersDNS := fs.String("peers-dns", "", "DNS name of every control plane replica (a headless Service of their pods): each passes the reports it receives to the others, so any answers /usage and /decisions for the whole gateway; and the replica writing policy status counts the gateways connected to every replica")
	usageMinutes := fs.Int("usage-minutes", usage.DefaultMinutes, "minutes of per-tenant usage the control plane keeps for `weighstation usage export` (in memory: about 100 bytes per tenant and minute)")
	usageSeconds := fs.Int("usage-seconds", usage.DefaultSeconds, "seconds of per-tenant usage the control plane keeps for `weighstation usage export --resolution 1s` (what `weighstation impact` replays)")
	otlpLogs := fs.String("otlp-logs-endpoint", "", "also send decisions as OpenTelemetry log records to this OTLP/HTTP logs endpoint (e.g. http://otel-collector:4318/v1/logs)")
	decisionsRetained := fs.Int("decisions-retained", 10000, "decisions the control plane keeps in memory for /decisions")
	clientMetrics := fs.Int("client-metrics", 0, "serve per-client gauges on /metrics for each tenant's N busiest clients over the last minute (tenants with client limits; 0: none; at most 100). They name clients, as /usage does")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if *clientMetrics < 0 || *clientMetrics > maxClientMetrics {
		fmt.Fprintf(os.Stderr, "weighstation serve: --client-metrics %d: want 0 (none) to %d clients per tenant\n", *clientMetrics, maxClientMetrics)
		return 2
	}
	g.BufferLimitBytes = uint32(*bufferLimit)
	opsAddress := *httpListen
	if *opsListen != "" {
		opsAddress = *opsListen
	}
	if addr := reportsAddress(*reportAddress, opsAddress); addr != "" {
		g.Reports = &xds.Reports{Address: addr, DecisionsPerSecond: uint32(*decisionsPerSecond), DelayThreshold: *delayThreshold}
	}
	g.NoTenantFeed = !*tenantFeed
	if err := source.check(); err != nil {
		fmt.Fprintln(os.Stderr, "weighstation serve:", err)
		return 2
	}
	if len(g.KafkaBrokers) > 0 && g.KafkaListen == "" {
		fmt.Fprintln(os.Stderr, "weighstation serve: --kafka-broker needs --kafka-listen: the broker listeners share its filter configuration")
		return 2
	}
	if err := g.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "weighstation serve:", err)
		return 2
	}
	if len(g.KafkaClusters) > 0 && g.Reports == nil {
		fmt.Fprintln(os.Stderr, "weighstation serve: --kafka-cluster needs reports (--report-address): the filters report the brokers they see with them")
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	memlimit.Apply(log)
	module, err := resolveServedWasm(&g.Wasm, *serveWasm, *httpListen)
	if err != nil {
		log.Error(err.Error())
		return 2
	}
	if g.Wasm.URL == "" {
		if g.Wasm.File == "" {
			log.Error("one of --wasm-file, --wasm-url or --serve-wasm is required")
			return 2
		}
		abs, err := filepath.Abs(g.Wasm.File)
		if err != nil {
			log.Error("wasm file", "err", err)
			return 2
		}
		g.Wasm.File = abs
	} else if g.Wasm.SHA256 == "" {
		log.Error("--wasm-url needs --wasm-sha256: Envoy only runs a remote module it can verify")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	server := xds.NewServer(g)
	brokers := discovery.New(kafkaRanges(g.KafkaClusters), log)
	if len(g.KafkaClusters) > 0 {
		server.HoldUntil(time.Now().Add(*discoveryHold))
		brokers.OnChange(func() {
			if err := server.SetKafkaNodes(brokers.Fronted()); err != nil {
				log.Error("publishing discovered Kafka brokers", "err", err)
			}
		})
	}
	tlsStanding := func() *tlssecrets.Standing { return nil }
	if g.TLSFiles != (tlssecrets.Files{}) {
		material, err := g.TLSFiles.Load()
		if err != nil {
			log.Error("TLS files", "err", err)
			return 2
		}
		_ = server.SetTLS(material) // nothing is published before the first policy
		w := tlssecrets.NewWatcher(g.TLSFiles, material)
		tlsStanding = w.Standing
		go w.Run(ctx, *tlsPoll, func(m *tlssecrets.Material) {
			if err := server.SetTLS(m); err != nil {
				log.Error("publishing rotated TLS material", "err", err)
			}
		}, log)
	}
	if *replicasDNS != "" {
		server.SetReplicas(0) // counted by DNS from now on: unknown until the first lookup
		go countReplicas(ctx, *replicasDNS, server, log)
	}
	ctrl := controller.New(source.describe(), server, log)
	server.OnVersionSeen(ctrl.Witness)
	fleet := &kubesource.Fleet{Own: server.Nodes, Client: &http.Client{}, Timeout: 500 * time.Millisecond}
	book := usage.New(*decisionsRetained, *usageMinutes, *usageSeconds)
	keepCurrent, err := source.start(ctx, ctrl, server, fleet.Nodes, book.Summary, log)
	if err != nil {
		log.Error(err.Error())
		return 2
	}

	xdsLis, err := net.Listen("tcp", *xdsListen)
	if err != nil {
		log.Error("xds listen", "err", err)
		return 1
	}
	httpLis, err := net.Listen("tcp", *httpListen)
	if err != nil {
		log.Error("http listen", "err", err)
		return 1
	}
	probe := &quota.Probe{Target: server.QuotaService, Client: &http.Client{}}
	go probe.Run(ctx, time.Second)
	mux := http.NewServeMux()
	sources := status.Sources{State: ctrl.State, Nodes: server.Nodes, Quota: probe.Standing, TLS: tlsStanding,
		KafkaBrokers: brokers.Brokers}
	if *clientMetrics > 0 {
		sources.Clients = func() []usage.ClientRate { return book.ClientRates(time.Now(), *clientMetrics) }
	}
	mux.Handle("/", status.Handler(sources))
	opsMux, opsLis := mux, httpLis
	if *opsListen != "" {
		if opsLis, err = net.Listen("tcp", *opsListen); err != nil {
			log.Error("ops listen", "err", err)
			return 1
		}
		opsMux = http.NewServeMux()
	}
	var relay *usage.Relay
	opsMux.Handle(kubesource.GatewaysPath, kubesource.GatewaysHandler(server.Nodes))
	if feed := server.Feed(); feed != nil {
		opsMux.Handle("GET "+tenantfeed.Path, tenantfeed.Handler(ctx, feed, server))
	}
	if peers := peersOf(*peersDNS, *peersList, opsLis); peers != nil {
		relay = &usage.Relay{Peers: peers, Client: &http.Client{}, Log: log}
		fleet.Peers = peers
		go relay.Run(ctx)
	}
	var otlp *usage.OTLP
	if *otlpLogs != "" {
		otlp = &usage.OTLP{Endpoint: *otlpLogs, Client: &http.Client{}, Log: log}
		go otlp.Run(ctx)
	}
	usage.Routes(opsMux, book, usage.Sinks{Relay: relay, OTLP: otlp,
		Limits:  func(_, tenant string) (usage.Limits, bool) { return usage.LimitsOf(server.Published(), tenant) },
		Brokers: brokers.Observe})
	var handler http.Handler = mux
	if module != nil {
		handler = withWasm(handler, module)
		log.Info("serving the filter module", "path", WasmPath, "url", g.Wasm.URL, "sha256", module.sha256)
	}
	httpSrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
	}
	errs := make(chan error, 4)
	go func() { errs <- server.Serve(ctx, xdsLis) }()
	go func() {
		if err := httpSrv.Serve(httpLis); !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	var opsSrv *http.Server
	if opsLis != httpLis {
		opsSrv = &http.Server{Handler: opsMux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := opsSrv.Serve(opsLis); !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
	}
	if server.Feed() != nil {
		go healSilentGateways(ctx, server, fleet)
	}
	kept := make(chan struct{})
	go func() { errs <- keepCurrent(); close(kept) }()
	log.Info("weighstation control plane serving", "xds", xdsLis.Addr().String(), "http", httpLis.Addr().String(), "ops", opsLis.Addr().String(), "policies", source.describe())

	select {
	case <-ctx.Done():
	case err := <-errs:
		if err != nil {
			log.Error("control plane stopped", "err", err)
			return 1
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select { // the policy source's last words: the status Lease released
	case <-kept:
	case <-shutdownCtx.Done():
	}
	_ = httpSrv.Shutdown(shutdownCtx)
	if opsSrv != nil {
		_ = opsSrv.Shutdown(shutdownCtx)
	}
	fmt.Fprintln(os.Stderr, "weighstation: stopped")
	return 0
}

// peersOf finds the other control plane replicas: a given list, or the addresses a DNS name
// resolves to at this replica's ops port; nil when there are none.
func peersOf(dns, list string, opsLis net.Listener) func(context.Context) ([]string, error) {
	switch {
	case list != "":
		addrs := strings.Split(list, ",")
		return func(context.Context) ([]string, error) { return addrs, nil }
	case dns != "":
		_, port, _ := net.SplitHostPort(opsLis.Addr().String())
		p, _ := strconv.Atoi(port)
		return func(ctx context.Context) ([]string, error) { return usage.Peers(ctx, dns, p) }
	}
	return nil
}

// reportsAddress is where Envoy reaches this control plane's ops listener: given, or the
// listen address when it names a host Envoy can dial.
func reportsAddress(given, opsListen string) string {
	switch given {
	case "off":
		return ""
	case "":
		host, _, err := net.SplitHostPort(opsListen)
		if err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
			return ""
		}
		return opsListen
	}
	return given
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// kafkaBrokers collects repeated --kafka-broker UPSTREAM=LISTEN[=ADVERTISE] flags.
type kafkaBrokers struct{ list *[]xds.KafkaBroker }

func (k kafkaBrokers) String() string {
	if k.list == nil {
		return ""
	}
	parts := make([]string, 0, len(*k.list))
	for _, b := range *k.list {
		parts = append(parts, b.Upstream+"="+b.Listen)
	}
	return strings.Join(parts, ",")
}

func (k kafkaBrokers) Set(v string) error {
	addrs, options, given := strings.Cut(v, ",")
	parts := strings.Split(addrs, "=")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("%q is not UPSTREAM=LISTEN[=ADVERTISE][,tls|,mtls][,upstream-tls]", v)
	}
	b := xds.KafkaBroker{Upstream: parts[0], Listen: parts[1]}
	if len(parts) == 3 {
		b.Advertise = parts[2]
	}
	var err error
	if b.Downstream, b.UpstreamTLS, err = kafkaTLSOptions(options, given); err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	*k.list = append(*k.list, b)
	return nil
}

// kafkaTLSOptions reads a Kafka listener's comma-separated options (given: a comma announced
// them): tls or mtls, upstream-tls.
func kafkaTLSOptions(options string, given bool) (d xds.Downstream, upstreamTLS bool, err error) {
	if !given {
		return xds.Plaintext, false, nil
	}
	for _, o := range strings.Split(options, ",") {
		if parsed, ok := xds.ParseDownstream(o); ok && d == xds.Plaintext {
			d = parsed
		} else if o == "upstream-tls" && !upstreamTLS {
			upstreamTLS = true
		} else {
			return d, upstreamTLS, fmt.Errorf("option %q is not one of tls, mtls, upstream-tls (once each)", o)
		}
	}
	return d, upstreamTLS, nil
}

// kafkaListen reads --kafka-listen ADDRESS[,tls|,mtls][,upstream-tls].
type kafkaListen struct{ g *xds.Gateway }

func (k kafkaListen) String() string {
	if k.g == nil {
		return ""
	}
	return k.g.KafkaListen
}

func (k kafkaListen) Set(v string) error {
	addr, options, given := strings.Cut(v, ",")
	d, upstreamTLS, err := kafkaTLSOptions(options, given)
	if err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	k.g.KafkaListen, k.g.KafkaTLS, k.g.KafkaUpstreamTLS = addr, d, upstreamTLS
	return nil
}

// natsTLSListen reads --nats-tls-listen ADDRESS[,mtls].
type natsTLSListen struct{ g *xds.Gateway }

func (n natsTLSListen) String() string {
	if n.g == nil || n.g.NATSTLSListen == "" {
		return ""
	}
	return n.g.NATSTLSListen + "," + n.g.NATSTLS.String()
}

func (n natsTLSListen) Set(v string) error {
	addr, option, _ := strings.Cut(v, ",")
	d, ok := xds.ParseDownstream(option)
	if option == "" {
		d, ok = xds.TLS, true
	}
	if addr == "" || !ok {
		return fmt.Errorf("%q is not ADDRESS[,tls|,mtls]", v)
	}
	n.g.NATSTLSListen, n.g.NATSTLS = addr, d
	return nil
}

// countReplicas keeps the live gateway replica count at the number of addresses a headless
// Service of the Envoy pods resolves to (its ready pods): what a global limit is divided by when
// the quota service is down. A failed lookup keeps the last count.
func countReplicas(ctx context.Context, name string, server *xds.Server, log *slog.Logger) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		if err != nil {
			log.Warn("counting gateway replicas", "dns", name, "err", err)
		} else {
			server.SetReplicas(len(addrs))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// addressList reads a comma-separated list of host:port (xds.Gateway.Check checks each).
type addressList struct{ list *[]string }

func (a addressList) String() string {
	if a.list == nil {
		return ""
	}
	return strings.Join(*a.list, ",")
}

func (a addressList) Set(v string) error {
	*a.list = nil
	for _, hp := range strings.Split(v, ",") {
		if hp = strings.TrimSpace(hp); hp != "" {
			*a.list = append(*a.list, hp)
		}
	}
	return nil
}

// kafkaRanges are the node id ranges discovery checks brokers against.
func kafkaRanges(cs []xds.KafkaCluster) []discovery.Range {
	out := make([]discovery.Range, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Range())
	}
	return out
}

// healSilentGateways has the server send its filter configuration again, every 5 s if need be,
// to a gateway whose filter of a protocol runs no worker (xds.Server.HealSilent), judged by every replica's
// view of the gateways.
func healSilentGateways(ctx context.Context, server *xds.Server, fleet *kubesource.Fleet) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		nodes, err := fleet.Complete(ctx)
		if err != nil {
			continue // not every peer answered: a worker polling one of them would be missed
		}
		server.HealSilent(nodes)
	}
}
