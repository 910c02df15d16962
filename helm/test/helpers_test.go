package charttest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// Tools and paths come from helm/helm.mk; the defaults are the repository's .tools/.
var (
	root        = envOr("WEIGHSTATION_ROOT", mustAbs("../.."))
	chartDir    = filepath.Join(root, "helm", "weighstation")
	toolsBin    = filepath.Join(root, ".tools", "bin")
	helmBin     = envOr("HELM", filepath.Join(toolsBin, "helm"))
	kubeconform = envOr("KUBECONFORM", filepath.Join(toolsBin, "kubeconform"))
	promtool    = envOr("PROMTOOL", filepath.Join(toolsBin, "promtool"))
	weighBin    = envOr("WEIGHSTATION", filepath.Join(toolsBin, "weighstation"))
	envoyBin    = envOr("ENVOY", filepath.Join(toolsBin, "envoy"))
	schemaDir   = envOr("K8S_SCHEMAS", filepath.Join(root, ".tools", "k8s-schemas"))
	wasmFile    = envOr("WASM", filepath.Join(root, "wasm-filter/target/wasm32-wasip1/release/weighstation_filter.wasm"))
)

// The oldest and newest Kubernetes the chart supports (Chart.yaml kubeVersion; the schemas
// installed by scripts/install-tools.sh k8s-schemas).
var kubeVersions = []string{"1.30.0", "1.37.0"}

const namespace = "weighstation-test"

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// run executes a command and returns its stdout, stderr and exit code (-1 if it could not start).
func run(t *testing.T, stdin io.Reader, name string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &exit):
		return out.String(), errb.String(), exit.ExitCode()
	default:
		t.Fatalf("%s: %v (run `make tools-helm`?)", name, err)
		return "", "", -1
	}
}

// render runs helm template with the given values files and --set pairs.
func render(t *testing.T, kubeVersion string, valuesFiles []string, sets ...string) (string, string, int) {
	t.Helper()
	args := []string{"template", "ws", chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	for _, f := range valuesFiles {
		args = append(args, "-f", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return run(t, nil, helmBin, args...)
}

func mustRender(t *testing.T, valuesFiles []string, sets ...string) manifests {
	t.Helper()
	out, stderr, code := render(t, kubeVersions[len(kubeVersions)-1], valuesFiles, sets...)
	if code != 0 {
		t.Fatalf("helm template: exit %d: %s", code, stderr)
	}
	return parseManifests(t, out)
}

// object is one rendered Kubernetes object, decoded generically.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := get(o, "metadata", "name").(string); return s }

type manifests []object

func parseManifests(t *testing.T, out string) manifests {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(out))
	var ms manifests
	for {
		var o map[string]any // not object: nested maps must decode as map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return ms
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		if o != nil {
			ms = append(ms, object(o))
		}
	}
}

// find returns the one object of kind whose name ends with suffix (names carry the release prefix).
func (ms manifests) find(t *testing.T, kind, suffix string) object {
	t.Helper()
	var found []object
	for _, o := range ms {
		if o.kind() == kind && strings.HasSuffix(o.name(), suffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s objects named *%s, want 1", len(found), kind, suffix)
	}
	return found[0]
}

func (ms manifests) has(kind string) bool {
	for _, o := range ms {
		if o.kind() == kind {
			return true
		}
	}
	return false
}

// get walks maps by key and lists by int index; nil when a step is missing.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(object)
			if !ok {
				mm, ok2 := v.(map[string]any)
				if !ok2 {
					return nil
				}
				m = mm
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// container returns the named (init) container of a Deployment.
func container(t *testing.T, deploy object, list, name string) map[string]any {
	t.Helper()
	cs, _ := get(deploy, "spec", "template", "spec", list).([]any)
	for _, c := range cs {
		m := c.(map[string]any)
		if m["name"] == name {
			return m
		}
	}
	t.Fatalf("%s has no %s %q", deploy.name(), list, name)
	return nil
}

func strings_(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// envoyArg returns the value following an Envoy option (Envoy takes "--name value" only).
func envoyArg(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// setEnvoyArg replaces the value following an Envoy option.
func setEnvoyArg(t *testing.T, args []string, name, value string) []string {
	t.Helper()
	out := append([]string{}, args...)
	for i, a := range out {
		if a == "--"+name && i+1 < len(out) {
			out[i+1] = value
			return out
		}
	}
	t.Fatalf("Envoy has no --%s argument: %v", name, args)
	return nil
}

// setFlag replaces (or appends) --name=value.
func setFlag(args []string, name, value string) []string {
	out := make([]string, 0, len(args)+1)
	done := false
	for _, a := range args {
		if strings.HasPrefix(a, "--"+name+"=") {
			out = append(out, "--"+name+"="+value)
			done = true
			continue
		}
		out = append(out, a)
	}
	if !done {
		out = append(out, "--"+name+"="+value)
	}
	return out
}

// servicePort returns the port number of the named port of a Service.
func servicePort(t *testing.T, svc object, name string) int {
	t.Helper()
	for _, p := range get(svc, "spec", "ports").([]any) {
		m := p.(map[string]any)
		if m["name"] == name {
			return m["port"].(int)
		}
	}
	t.Fatalf("service %s has no port %q", svc.name(), name)
	return 0
}

// writePolicies writes a policies ConfigMap's files into a fresh directory.
func writePolicies(t *testing.T, cm object) string {
	t.Helper()
	dir := t.TempDir()
	data, _ := get(cm, "data").(map[string]any)
	if len(data) == 0 {
		t.Fatalf("ConfigMap %s has no data", cm.name())
	}
	for file, content := range data {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content.(string)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// withTLSFiles points the control plane's and the quota service's TLS file flags at a throwaway
// CA and a certificate signed by it: the chart mounts Secrets at those paths, and a test has none.
func withTLSFiles(t *testing.T, args []string) []string {
	t.Helper()
	var present []string
	for _, f := range []string{"tls-cert-file", "tls-key-file", "tls-client-ca-file", "upstream-tls-ca-file", "upstream-tls-cert-file", "upstream-tls-key-file",
		"redis-tls-ca", "redis-tls-cert", "redis-tls-key"} {
		if _, ok := flagValue(args, f); ok {
			present = append(present, f)
		}
	}
	if len(present) == 0 {
		return args
	}
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chart test CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "gateway"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	files := map[string][]byte{
		"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	for name, b := range files {
		writeFile(t, filepath.Join(dir, name), string(b))
	}
	for _, f := range present {
		file := "tls.crt"
		switch {
		case strings.HasSuffix(f, "-ca-file"), f == "redis-tls-ca":
			file = "ca.crt"
		case strings.HasSuffix(f, "-key-file"), f == "redis-tls-key":
			file = "tls.key"
		}
		args = setFlag(args, f, filepath.Join(dir, file))
	}
	return args
}
