package scenario

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/load-tests/internal/refusals"
)

// natsConn connects to a NATS address with the run's credentials, or the direct ones when the
// address is nats-server itself. Refusals the server or gateway reports asynchronously (-ERR
// 'Permissions Violation …') are counted in told.
func natsConn(cfg Config, addr string, direct bool, role string, told *toldRefusals) (*nats.Conn, error) {
	name := "weighstation-bench-" + role
	if cfg.NATSName != "" && !direct {
		name = cfg.NATSName
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(5 * time.Second),
		// Keep the whole run's messages buffered rather than lose them if the client reconnects.
		nats.ReconnectBufSize(64 << 20),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if isRefusalText(err.Error()) {
				told.count.Add(1)
				told.reasons.Text(err.Error())
			}
		}),
	}
	user, password := cfg.NATSUser, cfg.NATSPassword
	if direct {
		user, password = cfg.DirectNATSUser, cfg.DirectNATSPassword
	}
	if user != "" {
		opts = append(opts, nats.UserInfo(user, password))
	}
	nc, err := nats.Connect("nats://"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	return nc, nil
}

// toldRefusals are the -ERR refusals a target's connections were told, by what they name.
type toldRefusals struct {
	count   atomic.Int64
	reasons refusals.Tally
}

// natsPool is a target's publishing connections.
type natsPool struct {
	conns   []*nats.Conn
	refused toldRefusals
}

// RefusalReasons are the limits the -ERR refusals named (a refused request's no-responders reply
// names none; its -ERR on the same connection does).
func (p *natsPool) RefusalReasons() []refusals.Reason { return p.refused.reasons.Reasons() }

func openPool(cfg Config, ep Endpoint, role string) (*natsPool, error) {
	p := &natsPool{}
	for i := range cfg.Connections {
		nc, err := natsConn(cfg, ep.NATS, ep.AsBaseline, fmt.Sprintf("%s-%d", role, i), &p.refused)
		if err != nil {
			p.close()
			return nil, err
		}
		p.conns = append(p.conns, nc)
	}
	return p, nil
}

func (p *natsPool) close() {
	for _, nc := range p.conns {
		nc.Close()
	}
}

func subjectPrefix(cfg Config, ep Endpoint) string {
	return "weighstation.bench." + cfg.RunID + "." + ep.Name
}
