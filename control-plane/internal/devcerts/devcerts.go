// Package devcerts issues the local stack's certificates: a throwaway CA, server certificates
// for the gateway and the brokers, client certificates for tenants and for the gateway itself.
// They are for development and tests only: new keys at every start, unencrypted, in the work
// directory, so that `make run` needs no openssl step.
package devcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// validity of every certificate issued: long enough for any local run, short enough that a
// leaked one is soon worthless.
const validity = 7 * 24 * time.Hour

// CA signs the stack's certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, which clients and brokers trust.
	PEM []byte
}

// Pair is a certificate (PEM) and its PKCS#8 private key (PEM), the form Envoy, Kafka's PEM
// keystore and Go's tls.X509KeyPair all read.
type Pair struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
}

// NewCA makes a CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"weighstation local stack"}},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Server issues a server certificate for hosts (DNS names or IP addresses).
func (ca *CA) Server(commonName string, hosts ...string) (Pair, error) {
	tmpl := ca.template(pkix.Name{CommonName: commonName})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

// Client issues a client certificate with this subject and SANs (spiffe://… URIs or DNS names).
func (ca *CA) Client(subject pkix.Name, sans ...string) (Pair, error) {
	tmpl := ca.template(subject)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, s := range sans {
		if u, err := url.Parse(s); err == nil && u.Scheme != "" {
			tmpl.URIs = append(tmpl.URIs, u)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	return ca.issue(tmpl)
}

func (ca *CA) template(subject pkix.Name) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func (ca *CA) issue(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Cert:    cert,
	}, nil
}

// Write puts the pair in dir as <name>.crt and <name>.key (the key readable by its owner only),
// replacing each file at once so that a reader never sees half of one.
func (p Pair) Write(dir, name string) error {
	if err := WriteAtomic(filepath.Join(dir, name+".key"), p.KeyPEM, 0o600); err != nil {
		return err
	}
	return WriteAtomic(filepath.Join(dir, name+".crt"), p.CertPEM, 0o644)
}

// WriteAtomic writes data to a temporary file beside path and renames it over path.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
