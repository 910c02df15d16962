package localstack

import (
	"fmt"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// natsOperator is nats-server's decentralized authentication (operator mode): an operator, its
// system account, and one account whose users connect with user JWTs the account signs. Keys
// are fresh at every start; nats-server reads the account JWTs from a memory resolver.
type natsOperator struct {
	operatorJWT            string
	systemPub, systemJWT   string
	accountPub, accountJWT string
	account                nkeys.KeyPair
}

func newNATSOperator() (*natsOperator, error) {
	op, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	opPub, _ := op.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "weighstation-local"
	o := &natsOperator{}
	sign := func(name string) (string, string, nkeys.KeyPair, error) {
		kp, err := nkeys.CreateAccount()
		if err != nil {
			return "", "", nil, err
		}
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		token, err := ac.Encode(op)
		return pub, token, kp, err
	}
	if o.systemPub, o.systemJWT, _, err = sign("SYS"); err != nil {
		return nil, err
	}
	oc.SystemAccount = o.systemPub
	if o.operatorJWT, err = oc.Encode(op); err != nil {
		return nil, err
	}
	if o.accountPub, o.accountJWT, o.account, err = sign("tenants"); err != nil {
		return nil, err
	}
	return o, nil
}

// userJWT issues a user of the account: its JWT and nkey seed, proxy_required when asked (the
// user then connects only through a trusted proxy).
func (o *natsOperator) userJWT(name string, proxyRequired bool) (token string, seed []byte, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", nil, err
	}
	pub, _ := kp.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	uc.ProxyRequired = proxyRequired
	if token, err = uc.Encode(o.account); err != nil {
		return "", nil, fmt.Errorf("signing the user JWT of %s: %w", name, err)
	}
	seed, err = kp.Seed()
	return token, seed, err
}
