package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
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
	ca, err := NewCA("weighstation-node-ca")
	if err != nil {
		return nil, err
	}
	p := &PKI{
		CA: filepath.Join(dir, "ca.crt"), APIServer: filepath.Join(dir, "apiserver.crt"),
		Kubelet: filepath.Join(dir, "kubelet.crt"), Admin: filepath.Join(dir, "admin.crt"),
		ServiceAccountKey: filepath.Join(dir, "service-account.key"),
		caPEM:             ca.PEM,
	}
	if err := os.WriteFile(p.CA, p.caPEM, 0o644); err != nil {
		return nil, err
	}
	// issue writes a certificate of the CA's and its key (file, Key(file)).
	issue := func(file, cn string, orgs []string, usage x509.ExtKeyUsage, names, ips []string) (certPEM, keyPEM []byte, err error) {
		if certPEM, keyPEM, err = ca.Issue(cn, orgs, usage, names, ips); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(file, certPEM, 0o644); err != nil {
			return nil, nil, err
		}
		return certPEM, keyPEM, os.WriteFile(Key(file), keyPEM, 0o600)
	}
	if _, _, err := issue(p.APIServer, "kube-apiserver", nil, x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]string{NodeIP, APIServiceIP, "127.0.0.1"}); err != nil {
		return nil, err
	}
	if _, _, err := issue(p.Kubelet, NodeName, nil, x509.ExtKeyUsageServerAuth, []string{NodeName}, []string{NodeIP}); err != nil {
		return nil, err
	}
	if p.adminPEM, p.adminKeyPEM, err = issue(p.Admin, "weighstation-node-admin", []string{"system:masters"}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
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
