package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	wasmnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// A minimal valid module header: magic and version 1.
var testModule = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

func writeModule(t *testing.T, data []byte) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "weighstation_filter.wasm")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return path, hex.EncodeToString(sum[:])
}

// What Envoy is told (URL and sha256 in the ECDS code source) must match what the control
// plane serves at that URL.
func TestServeWasmPinsTheServedBytesInTheXDSCodeSource(t *testing.T) {
	path, want := writeModule(t, testModule)
	var g xds.Gateway
	g.NATSListen, g.NATSUpstream = "0.0.0.0:4222", "nats:4222"
	g.BufferLimitBytes = 1 << 20
	m, err := resolveServedWasm(&g.Wasm, path, "0.0.0.0:18080")
	if err != nil {
		t.Fatal(err)
	}
	if g.Wasm.SHA256 != want || g.Wasm.URL != "http://localhost:18080"+WasmPath {
		t.Fatalf("wasm source %+v, want sha256 %s and the listener's %s", g.Wasm, want, WasmPath)
	}

	set, err := policy.LoadDir("../../../policies")
	if err != nil {
		t.Fatal(err)
	}
	res, err := xds.Resources(g, set, "1-test")
	if err != nil {
		t.Fatal(err)
	}
	ext := res[resourcev3.ExtensionConfigType][0].(*corev3.TypedExtensionConfig)
	var w wasmnetv3.Wasm
	if err := ext.GetTypedConfig().UnmarshalTo(&w); err != nil {
		t.Fatal(err)
	}
	remote := w.GetConfig().GetVmConfig().GetCode().GetRemote()
	if remote.GetSha256() != want || remote.GetHttpUri().GetUri() != g.Wasm.URL || remote.GetHttpUri().GetCluster() != "weighstation_wasm" {
		t.Fatalf("ECDS code source %v", remote)
	}

	srv := httptest.NewServer(withWasm(http.NotFoundHandler(), m))
	defer srv.Close()
	resp, err := http.Get(srv.URL + WasmPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.Sum256(body)
	if resp.StatusCode != 200 || hex.EncodeToString(sum[:]) != remote.GetSha256() {
		t.Fatalf("GET %s: %d, %d bytes with sha256 %x; Envoy expects %s", WasmPath, resp.StatusCode, len(body), sum, remote.GetSha256())
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/wasm" {
		t.Errorf("Content-Type %q", ct)
	}
}

// The served bytes are those read at start: replacing the file cannot make the control plane
// serve a module whose sha256 differs from the one it pinned.
func TestServedModuleIsTheOneReadAtStart(t *testing.T) {
	path, want := writeModule(t, testModule)
	var src xds.WasmSource
	m, err := resolveServedWasm(&src, path, "127.0.0.1:18080")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(append([]byte{}, testModule...), 0x00), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, WasmPath, nil))
	sum := sha256.Sum256(rec.Body.Bytes())
	if hex.EncodeToString(sum[:]) != want || src.SHA256 != want {
		t.Fatalf("served sha256 %x, pinned %s, want %s", sum, src.SHA256, want)
	}
}

func TestServeWasmKeepsAnExplicitURLAndOtherPaths(t *testing.T) {
	path, want := writeModule(t, testModule)
	src := xds.WasmSource{URL: "http://weighstation.ns.svc:18080" + WasmPath, SHA256: want}
	m, err := resolveServedWasm(&src, path, "0.0.0.0:18080")
	if err != nil {
		t.Fatal(err)
	}
	if src.URL != "http://weighstation.ns.svc:18080"+WasmPath {
		t.Errorf("--wasm-url was replaced: %s", src.URL)
	}
	h := withWasm(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "status") }), m)
	for _, c := range []struct {
		method, path string
		code         int
		body         string
	}{
		{http.MethodGet, "/status", 200, "status"},
		{http.MethodHead, WasmPath, 200, ""},
		{http.MethodPost, WasmPath, 405, "method not allowed\n"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.code || rec.Body.String() != c.body {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, rec.Code, rec.Body.String(), c.code, c.body)
		}
	}
}

func TestServeWasmRejectsBadCombinations(t *testing.T) {
	path, _ := writeModule(t, testModule)
	notWasm, _ := writeModule(t, []byte("#!/bin/sh\n"))
	for _, c := range []struct {
		name  string
		src   xds.WasmSource
		file  string
		error string
	}{
		{"with --wasm-file", xds.WasmSource{File: "/x.wasm"}, path, "--serve-wasm and --wasm-file are exclusive"},
		{"sha256 mismatch", xds.WasmSource{SHA256: strings.Repeat("0", 64)}, path, "does not match"},
		{"not a module", xds.WasmSource{}, notWasm, "is not a WebAssembly module"},
		{"missing file", xds.WasmSource{}, path + ".missing", "no such file"},
	} {
		_, err := resolveServedWasm(&c.src, c.file, "127.0.0.1:18080")
		if err == nil || !strings.Contains(err.Error(), c.error) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.error)
		}
	}
	var src xds.WasmSource
	if m, err := resolveServedWasm(&src, "", "127.0.0.1:18080"); m != nil || err != nil || src != (xds.WasmSource{}) {
		t.Errorf("without --serve-wasm: %v %v %+v", m, err, src)
	}
}
