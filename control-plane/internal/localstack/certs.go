package localstack

import (
	"crypto/x509/pkix"
	"math/big"
	"os"
	"path/filepath"

	"github.com/weighstation/weighstation/control-plane/internal/devcerts"
)

// LocalTLSClients are the client certificates `make run` issues into run/tls/<tenant>.crt|key,
// by tenant: acme's is known by its subject, globex's by its URI SAN (the shipped policies name
// both). Local fixtures, issued afresh at every start.
var LocalTLSClients = []struct {
	Tenant  string
	Subject pkix.Name
	SAN     string
}{
	{"acme", pkix.Name{CommonName: "acme-svc", Organization: []string{"weighstation-local"}}, ""},
	{"globex", pkix.Name{CommonName: "globex-svc", Organization: []string{"weighstation-local"}}, "spiffe://weighstation.local/globex"},
}

// tlsMaterial is the stack's certificates, in dir:
//   - ca.crt signs the gateway's server certificate (gateway.crt) and the clients' certificates:
//     clients trust it, and Envoy verifies client certificates with it;
//   - broker-ca.crt signs the brokers' certificate (broker.crt, also broker.pem for Kafka's PEM
//     keystore) and the gateway's client certificate (gateway-client.crt): the brokers' TLS
//     listeners admit only that certificate, so no client reaches them around the gateway.
type tlsMaterial struct {
	dir     string
	clients *devcerts.CA
}

func newTLSMaterial(dir string) (*tlsMaterial, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	clients, err := devcerts.NewCA("weighstation local CA")
	if err != nil {
		return nil, err
	}
	brokers, err := devcerts.NewCA("weighstation local broker CA")
	if err != nil {
		return nil, err
	}
	m := &tlsMaterial{dir: dir, clients: clients}
	for name, pem := range map[string][]byte{"ca.crt": clients.PEM, "broker-ca.crt": brokers.PEM} {
		if err := devcerts.WriteAtomic(m.path(name), pem, 0o644); err != nil {
			return nil, err
		}
	}
	if _, err := m.RotateServerCertificate(); err != nil {
		return nil, err
	}
	broker, err := brokers.Server("broker", "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if err := broker.Write(dir, "broker"); err != nil {
		return nil, err
	}
	if err := devcerts.WriteAtomic(m.path("broker.pem"), append(append([]byte{}, broker.KeyPEM...), broker.CertPEM...), 0o600); err != nil {
		return nil, err
	}
	gateway, err := brokers.Client(pkix.Name{CommonName: "weighstation-gateway"})
	if err != nil {
		return nil, err
	}
	if err := gateway.Write(dir, "gateway-client"); err != nil {
		return nil, err
	}
	for _, c := range LocalTLSClients {
		if _, err := m.IssueClient(c.Tenant, c.Subject, c.SAN); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *tlsMaterial) path(name string) string { return filepath.Join(m.dir, name) }

// RotateServerCertificate issues the gateway a new server certificate and writes it over the
// old one (key first: until the certificate follows, the pair does not match and the control
// plane keeps the previous one). It returns the new certificate's serial number.
func (m *tlsMaterial) RotateServerCertificate() (*big.Int, error) {
	p, err := m.clients.Server("weighstation gateway", "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if err := p.Write(m.dir, "gateway"); err != nil {
		return nil, err
	}
	return p.Cert.SerialNumber, nil
}

// IssueClient writes <name>.crt and <name>.key: a client certificate the gateway accepts.
func (m *tlsMaterial) IssueClient(name string, subject pkix.Name, san string) (devcerts.Pair, error) {
	var sans []string
	if san != "" {
		sans = append(sans, san)
	}
	p, err := m.clients.Client(subject, sans...)
	if err != nil {
		return p, err
	}
	return p, p.Write(m.dir, name)
}
