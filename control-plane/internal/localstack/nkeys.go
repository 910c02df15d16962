package localstack

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
)

// LocalNkeyUsers are the NATS nkey users `make run` gives nats-server, by tenant. Their seeds are
// derived from fixed strings so that policies/ can name their public keys: they are local
// fixtures, as public as this file, and must never be used elsewhere.
var LocalNkeyUsers = []string{"acme", "globex"}

// localNkey is the key pair of a local fixture user.
func localNkey(tenant string) (nkeys.KeyPair, error) {
	raw := sha256.Sum256([]byte("weighstation local stack nkey user " + tenant))
	return nkeys.FromRawSeed(nkeys.PrefixByteUser, raw[:])
}

// LocalNkeyPublic is the public key of a local fixture user (what its policy names).
func LocalNkeyPublic(tenant string) (string, error) {
	kp, err := localNkey(tenant)
	if err != nil {
		return "", err
	}
	return kp.PublicKey()
}

// writeSeed writes a key pair's seed where a client reads it (`nats --nkey FILE`), readable
// by its owner only.
func writeSeed(path string, kp nkeys.KeyPair) error {
	seed, err := kp.Seed()
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(seed, '\n'), 0o600)
}

// security is the stack's NATS trust material: the gateway's proxy key (nats-server trusts its
// signature; the users behind it are proxy_required) and the nkey users' public keys.
type security struct {
	proxySeed   string
	proxyPublic string
	nkeyUsers   []string // public keys, each proxy_required
}

// newSecurity makes a fresh proxy key for this run and writes each local nkey user's seed into
// dir/nkeys/<tenant>.nk.
func newSecurity(dir string, extraNkeyUsers []string) (*security, error) {
	proxy, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	seed, err := proxy.Seed()
	if err != nil {
		return nil, err
	}
	pub, err := proxy.PublicKey()
	if err != nil {
		return nil, err
	}
	sec := &security{proxySeed: string(seed), proxyPublic: pub}
	nkDir := filepath.Join(dir, "nkeys")
	if err := os.MkdirAll(nkDir, 0o700); err != nil {
		return nil, err
	}
	for _, tenant := range LocalNkeyUsers {
		kp, err := localNkey(tenant)
		if err != nil {
			return nil, err
		}
		if err := writeSeed(filepath.Join(nkDir, tenant+".nk"), kp); err != nil {
			return nil, fmt.Errorf("writing the nkey of %s: %w", tenant, err)
		}
		userPub, _ := kp.PublicKey()
		sec.nkeyUsers = append(sec.nkeyUsers, userPub)
	}
	sec.nkeyUsers = append(sec.nkeyUsers, extraNkeyUsers...)
	return sec, nil
}
