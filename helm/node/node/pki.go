package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the node's certificates, written under Dirs.PKI(): one CA signs the API server's
// serving certificate, the kubelet's, and one client certificate in system:masters that every
// component and the test use. A single-node test cluster needs no finer identities; the chart's
// own RBAC is what the tests exercise, through its ServiceAccounts.
type PKI struct {
	CA, APIServer, Kubelet, Admin string // certificate files; the key is the same name with .key
	ServiceAccountKey             string // signs ServiceAccount tokens
	caPEM, adminPEM, adminKeyPEM  []byte
}

func writePKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, caKey, err := newCA()
	if err != nil {
		return nil, err
	}
	p := &PKI{
		CA: filepath.Join(dir, "ca.crt"), APIServer: filepath.Join(dir, "apiserver.crt"),
		Kubelet: filepath.Join(dir, "kubelet.crt"), Admin: filepath.Join(dir, "admin.crt"),
		ServiceAccountKey: filepath.Join(dir, "service-account.key"),
	}
	p.caPEM = pemBlock("CERTIFICATE", ca.Raw)
	if err := os.WriteFile(p.CA, p.caPEM, 0o644); err != nil {
		return nil, err
	}
	serving := func(file, cn string, ips []string, names []string) error {
		tmpl := leaf(cn, nil)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, ip := range ips {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
		}
		tmpl.DNSNames = names
		_, _, err := issue(file, tmpl, ca, caKey)
		return err
	}
	if err := serving(p.APIServer, "kube-apiserver", []string{NodeIP, APIServiceIP, "127.0.0.1"},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}); err != nil {
		return nil, err
	}
	if err := serving(p.Kubelet, NodeName, []string{NodeIP}, []string{NodeName}); err != nil {
		return nil, err
	}
	admin := leaf("weighstation-node-admin", []string{"system:masters"})
	admin.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if p.adminPEM, p.adminKeyPEM, err = issue(p.Admin, admin, ca, caKey); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	return p, os.WriteFile(p.ServiceAccountKey, pemBlock("EC PRIVATE KEY", der), 0o600)
}

// Key is the private key file of a certificate file.
func Key(cert string) string { return cert[:len(cert)-len(".crt")] + ".key" }

// Kubeconfig is a kubeconfig for the admin identity against the API server.
func (p *PKI) Kubeconfig() []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: admin
  user:
    client-certificate-data: %[4]s
    client-key-data: %[5]s
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: admin}
current-context: %[1]s
`, NodeName, APIServer(), b64(p.caPEM), b64(p.adminPEM), b64(p.adminKeyPEM))
}

func newCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := leaf("weighstation-node-ca", nil)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func leaf(cn string, orgs []string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// issue signs tmpl with the CA and writes the certificate and its key (file, Key(file)).
func issue(file string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM, keyPEM = pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER)
	if err := os.WriteFile(file, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, os.WriteFile(Key(file), keyPEM, 0o600)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
