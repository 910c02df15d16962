package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Settings that cannot work stop `weighstation quota` before it listens (exit 2), each with
// the flag to change (redisclient's tests cover every combination).
func TestQuotaRefusesBadStoreSettings(t *testing.T) {
	for _, args := range [][]string{
		{"--redis-mode=ring"},
		{"--redis-mode=sentinel", "--redis=s0:26379"},
		{"--redis=a:6379,b:6379"},
		{"--redis-tls-ca=/ca.crt"},
		{"--redis-password-file=/no/such/file"},
	} {
		if code := quotaCmd(append(args, "--listen=127.0.0.1:0")); code != 2 {
			t.Errorf("quota %v exited %d, want 2", args, code)
		}
	}
}

// Passwords come from the environment or a file, one way only.
func TestSecretFromEnvOrFile(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, env, file, want, err string
	}{
		{name: "none"},
		{name: "from the environment", env: "s3cret", want: "s3cret"},
		{name: "from a file, its newline dropped", file: file("pw", "s3cret\n"), want: "s3cret"},
		{name: "a Secret written on Windows", file: file("crlf", "s3cret\r\n"), want: "s3cret"},
		{name: "both", env: "a", file: file("both", "b"), err: "both TEST_REDIS_PASSWORD and --redis-password-file are set"},
		{name: "empty file", file: file("empty", "\n"), err: "is empty"},
		{name: "missing file", file: filepath.Join(dir, "nope"), err: "--redis-password-file: open"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TEST_REDIS_PASSWORD", c.env)
			got, err := secret("TEST_REDIS_PASSWORD", "--redis-password-file", c.file)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("%q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestSplitAddrs(t *testing.T) {
	for in, want := range map[string]string{
		"a:1":            "a:1",
		" a:1 , b:2 ,":   "a:1|b:2",
		"":               "",
		"s0:1,s1:1,s2:1": "s0:1|s1:1|s2:1",
	} {
		if got := strings.Join(splitAddrs(in), "|"); got != want {
			t.Errorf("splitAddrs(%q) = %q, want %q", in, got, want)
		}
	}
}
