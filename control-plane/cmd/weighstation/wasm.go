package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// WasmPath is where `serve --serve-wasm` serves the filter module on the HTTP listener.
const WasmPath = "/wasm/weighstation_filter.wasm"

// wasmModule is the filter module the control plane serves to Envoy, read once at start: the
// bytes served are always the ones whose sha256 the xDS configuration pins, even if the file
// changes on disk afterwards (a new module means a new control plane process).
type wasmModule struct {
	data    []byte
	sha256  string
	modTime time.Time
}

var wasmMagic = []byte{0x00, 'a', 's', 'm'}

func loadWasmModule(path string) (*wasmModule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, wasmMagic) {
		return nil, fmt.Errorf("%s is not a WebAssembly module", path)
	}
	sum := sha256.Sum256(data)
	m := &wasmModule{data: data, sha256: hex.EncodeToString(sum[:]), modTime: time.Now()}
	if fi, err := os.Stat(path); err == nil {
		m.modTime = fi.ModTime()
	}
	return m, nil
}

func (m *wasmModule) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/wasm")
	w.Header().Set("ETag", `"`+m.sha256+`"`)
	w.Header().Set("X-Content-Sha256", m.sha256)
	http.ServeContent(w, r, "weighstation_filter.wasm", m.modTime, bytes.NewReader(m.data))
}

// withWasm serves the module at WasmPath and everything else from next.
func withWasm(next http.Handler, m *wasmModule) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(WasmPath, m)
	mux.Handle("/", next)
	return mux
}

// defaultWasmURL names the module on the HTTP listener. Envoy connects through the bootstrap's
// weighstation_wasm cluster (`weighstation bootstrap --wasm-host`), so the host here only
// becomes the request's Host header; pass --wasm-url to name it as clients should see it.
func defaultWasmURL(httpListen string) string {
	host, port, err := net.SplitHostPort(httpListen)
	if err != nil {
		return "http://localhost" + WasmPath
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + WasmPath
}

// resolveServedWasm applies --serve-wasm to the xDS code source: Envoy is told to fetch the
// module over HTTP (from --wasm-url, or this listener's WasmPath) pinned by the sha256 of the
// bytes this process serves. It returns nil when --serve-wasm is not set.
func resolveServedWasm(src *xds.WasmSource, serveWasm, httpListen string) (*wasmModule, error) {
	if serveWasm == "" {
		return nil, nil
	}
	if src.File != "" {
		return nil, fmt.Errorf("--serve-wasm and --wasm-file are exclusive: Envoy either fetches the module or reads a local file")
	}
	m, err := loadWasmModule(serveWasm)
	if err != nil {
		return nil, fmt.Errorf("--serve-wasm: %w", err)
	}
	if src.SHA256 != "" && src.SHA256 != m.sha256 {
		return nil, fmt.Errorf("--wasm-sha256 %s does not match %s (sha256 %s)", src.SHA256, serveWasm, m.sha256)
	}
	src.SHA256 = m.sha256
	if src.URL == "" {
		src.URL = defaultWasmURL(httpListen)
	}
	return m, nil
}
