// Package tlssecrets loads the gateway's TLS material from PEM files and turns it into the SDS
// secrets Envoy uses. A rotated file becomes a new secret version: Envoy uses it for the next
// handshake and leaves open connections alone. A file that does not load (half written, a key
// that does not match its certificate) is reported and the last good version stays in force.
package tlssecrets

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// SDS secret names the listeners and clusters refer to.
const (
	// ServerCertificate is the gateway's certificate chain and key, shown to clients.
	ServerCertificate = "weighstation-server-certificate"
	// ClientCA verifies clients' certificates (mTLS).
	ClientCA = "weighstation-client-ca"
	// UpstreamCA verifies the brokers' certificates.
	UpstreamCA = "weighstation-upstream-ca"
	// UpstreamCertificate is the gateway's own client certificate towards the brokers.
	UpstreamCertificate = "weighstation-upstream-certificate"
)

// Files are the PEM files of the gateway's TLS material; an empty name leaves that part out.
type Files struct {
	CertFile, KeyFile                 string // the server certificate chain and its key
	ClientCAFile                      string // CA bundle for client certificates
	UpstreamCAFile                    string // CA bundle for the brokers' certificates
	UpstreamCertFile, UpstreamKeyFile string // the gateway's client certificate towards brokers
}

// Server reports whether a server certificate is configured (TLS listeners need one).
func (f Files) Server() bool { return f.CertFile != "" }

// ClientCAs reports whether client certificates can be verified.
func (f Files) ClientCAs() bool { return f.ClientCAFile != "" }

// Upstream reports whether brokers' certificates can be verified (TLS to brokers needs it).
func (f Files) Upstream() bool { return f.UpstreamCAFile != "" }

// UpstreamClient reports whether the gateway shows brokers a certificate of its own.
func (f Files) UpstreamClient() bool { return f.UpstreamCertFile != "" }

// Check reports flags given without their partners.
func (f Files) Check() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	if (f.UpstreamCertFile == "") != (f.UpstreamKeyFile == "") {
		return errors.New("--upstream-tls-cert-file and --upstream-tls-key-file go together")
	}
	if f.ClientCAFile != "" && f.CertFile == "" {
		return errors.New("--tls-client-ca-file needs --tls-cert-file: client certificates are verified on TLS listeners")
	}
	if f.UpstreamCertFile != "" && f.UpstreamCAFile == "" {
		return errors.New("--upstream-tls-cert-file needs --upstream-tls-ca-file: TLS to brokers verifies them")
	}
	return nil
}

// Material is one loaded and checked version of the files.
type Material struct {
	secrets []*tlsv3.Secret
	// Version changes whenever any file's content does.
	Version string
	// NotAfter is when the server certificate expires (zero without one).
	NotAfter time.Time
}

// Secrets are the SDS resources of this version.
func (m *Material) Secrets() []types.Resource {
	out := make([]types.Resource, len(m.secrets))
	for i, s := range m.secrets {
		out[i] = s
	}
	return out
}

// Load reads and checks every configured file. Errors name the file.
func (f Files) Load() (*Material, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	m := &Material{}
	h := sha256.New()
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		h.Write([]byte(path))
		h.Write(b)
		return b, nil
	}
	if f.CertFile != "" {
		chain, key, leaf, err := keyPair(read, f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		m.NotAfter = leaf.NotAfter
		m.secrets = append(m.secrets, certificateSecret(ServerCertificate, chain, key))
	}
	if f.UpstreamCertFile != "" {
		chain, key, _, err := keyPair(read, f.UpstreamCertFile, f.UpstreamKeyFile)
		if err != nil {
			return nil, err
		}
		m.secrets = append(m.secrets, certificateSecret(UpstreamCertificate, chain, key))
	}
	for _, ca := range []struct{ name, file string }{{ClientCA, f.ClientCAFile}, {UpstreamCA, f.UpstreamCAFile}} {
		if ca.file == "" {
			continue
		}
		b, err := read(ca.file)
		if err != nil {
			return nil, err
		}
		if _, err := certificates(b); err != nil {
			return nil, fmt.Errorf("%s: %w", ca.file, err)
		}
		m.secrets = append(m.secrets, &tlsv3.Secret{Name: ca.name, Type: &tlsv3.Secret_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: inline(b)},
		}})
	}
	m.Version = hex.EncodeToString(h.Sum(nil))[:16]
	return m, nil
}

// keyPair reads a certificate chain and its key and checks that they belong together.
func keyPair(read func(string) ([]byte, error), certFile, keyFile string) (chain, key []byte, leaf *x509.Certificate, err error) {
	if chain, err = read(certFile); err != nil {
		return nil, nil, nil, err
	}
	if key, err = read(keyFile); err != nil {
		return nil, nil, nil, err
	}
	pair, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s with %s: %w", certFile, keyFile, err)
	}
	leaf, err = x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", certFile, err)
	}
	return chain, key, leaf, nil
}

// certificates parses every CERTIFICATE block of a PEM bundle; there must be at least one.
func certificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate in the file")
	}
	return out, nil
}

func inline(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

func certificateSecret(name string, chain, key []byte) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(chain),
		PrivateKey:       inline(key),
	}}}
}

// Standing is what /status and /metrics report of the TLS material in force.
type Standing struct {
	Version string `json:"version"`
	// ServerCertificateNotAfter is when the certificate clients see expires.
	ServerCertificateNotAfter *time.Time `json:"serverCertificateNotAfter,omitempty"`
	// Error is why the files on disk do not load, while they do not (the version above stays).
	Error string `json:"error,omitempty"`
}

// Watcher re-reads the files and keeps the standing of the version in force.
type Watcher struct {
	files Files
	mu    sync.Mutex
	in    *Material
	err   error
}

// NewWatcher starts from the version loaded at start.
func NewWatcher(f Files, current *Material) *Watcher { return &Watcher{files: f, in: current} }

// Standing reports the version in force and any error of the files on disk.
func (w *Watcher) Standing() *Standing {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := &Standing{Version: w.in.Version}
	if !w.in.NotAfter.IsZero() {
		t := w.in.NotAfter
		st.ServerCertificateNotAfter = &t
	}
	if w.err != nil {
		st.Error = w.err.Error()
	}
	return st
}

// Run re-reads the files every poll and calls onChange with each new version that loads; a
// version that does not load is logged and skipped, and the last good one stays in force.
// Kubernetes updates a mounted Secret by swapping a symlink, so re-reading is enough to see it.
func (w *Watcher) Run(ctx context.Context, poll time.Duration, onChange func(*Material), log *slog.Logger) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, err := w.files.Load()
		w.mu.Lock()
		repeated := err != nil && w.err != nil && err.Error() == w.err.Error()
		w.err = err
		changed := err == nil && m.Version != w.in.Version
		if changed {
			w.in = m
		}
		w.mu.Unlock()
		switch {
		case err != nil && !repeated:
			log.Error("TLS files do not load; the previous certificates stay in force", "err", err)
		case changed:
			log.Info("TLS files changed: new handshakes use them", "version", m.Version, "serverCertificateNotAfter", m.NotAfter)
			onChange(m)
		}
	}
}
