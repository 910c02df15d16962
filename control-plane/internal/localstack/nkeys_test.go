package localstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

// The policies in policies/ name the local nkey users by public key: the keys must not drift.
func TestLocalNkeyUsersAreNamedByTheShippedPolicies(t *testing.T) {
	for _, tenant := range LocalNkeyUsers {
		pub, err := LocalNkeyPublic(tenant)
		if err != nil {
			t.Fatal(err)
		}
		policy, err := os.ReadFile(filepath.Join("..", "..", "..", "policies", tenant+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(policy), pub) {
			t.Errorf("policies/%s.yaml does not name its local nkey user %s", tenant, pub)
		}
	}
}

func TestSecurityWritesSeedsTheirOwnerAloneCanRead(t *testing.T) {
	dir := t.TempDir()
	sec, err := newSecurity(dir, []string{"UEXTRA"})
	if err != nil {
		t.Fatal(err)
	}
	if !nkeys.IsValidPublicUserKey(sec.proxyPublic) {
		t.Errorf("proxy key %q", sec.proxyPublic)
	}
	if got := len(sec.nkeyUsers); got != len(LocalNkeyUsers)+1 || sec.nkeyUsers[got-1] != "UEXTRA" {
		t.Errorf("nkey users %v", sec.nkeyUsers)
	}
	for _, tenant := range LocalNkeyUsers {
		path := filepath.Join(dir, "nkeys", tenant+".nk")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", path, fi.Mode().Perm())
		}
		seed, _ := os.ReadFile(path)
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		if want, _ := LocalNkeyPublic(tenant); pub != want {
			t.Errorf("%s: seed of %s, want %s", tenant, pub, want)
		}
	}
}
