package localstack

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// LocalKafkaSASLUsers are the Kafka SASL users of `make run`, one per shipped tenant, each with
// the password "<user>-secret" (local fixtures).
var LocalKafkaSASLUsers = []string{"acme-svc", "globex-svc"}

func (c Config) kafkaSASLUsers() []string {
	return append(append([]string{}, LocalKafkaSASLUsers...), c.ExtraKafkaSASLUsers...)
}

// scramIterations is Kafka's minimum for SCRAM credentials.
const scramIterations = 4096

// addSCRAMUsers gives every user SCRAM-SHA-256 and SCRAM-SHA-512 credentials (password
// "<user>-secret") through the broker's DIRECT listener. KRaft keeps SCRAM credentials in
// the cluster metadata, so this runs at every start (it replaces what a previous run set).
func addSCRAMUsers(broker string, users []string) error {
	cl, err := kgo.NewClient(DirectKafka(broker)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// One request per mechanism: the broker refuses two changes to one user in one request.
	for _, m := range []struct {
		kind int8
		hash func() hash.Hash
		size int
	}{{1, sha256.New, sha256.Size}, {2, sha512.New, sha512.Size}} {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		for _, u := range users {
			salt := make([]byte, 24)
			if _, err := rand.Read(salt); err != nil {
				return err
			}
			salted, err := pbkdf2.Key(m.hash, u+"-secret", salt, scramIterations, m.size)
			if err != nil {
				return err
			}
			up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u, m.kind, scramIterations, salt, salted
			req.Upsertions = append(req.Upsertions, up)
		}
		if err := alterSCRAM(cl, req); err != nil {
			return err
		}
	}
	return nil
}

func alterSCRAM(cl *kgo.Client, req *kmsg.AlterUserSCRAMCredentialsRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("adding SCRAM users: %w", err)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			return fmt.Errorf("adding SCRAM user %s: error %d %s", r.User, r.ErrorCode, msg)
		}
	}
	return nil
}

// DirectKafka are a franz-go client's options for the broker's DIRECT listener at addr: SASL
// PLAIN as BaselineKafkaUser.
func DirectKafka(addr string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: BaselineKafkaUser, Pass: BaselineKafkaUser + "-secret"}.AsMechanism())}
}
