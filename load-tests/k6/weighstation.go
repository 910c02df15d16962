// Package weighstation is a k6 extension, imported in scripts as "k6/x/weighstation", that
// gives k6 NATS (nats.go) and Kafka (IBM/sarama) clients, so the users' own fixed-rate tool can
// drive the gateway. Clients are shared by every VU with the same options: a k6 test with 200
// VUs opens the connections its options ask for, not 200 (a tenant's connection limit would
// otherwise be the first thing measured).
package weighstation

import (
	"fmt"
	"sync"

	"github.com/grafana/sobek"
	"go.k6.io/k6/js/modules"
)

func init() {
	modules.Register("k6/x/weighstation", newRoot())
}

// root is created once per k6 process: it holds the shared clients.
type root struct {
	mu    sync.Mutex
	nats  map[natsOptions]*natsPool
	kafka map[kafkaKey]*kafkaPool
}

func newRoot() *root {
	return &root{nats: map[natsOptions]*natsPool{}, kafka: map[kafkaKey]*kafkaPool{}}
}

// NewModuleInstance is called for each VU.
func (r *root) NewModuleInstance(vu modules.VU) modules.Instance {
	return &instance{root: r, vu: vu, metrics: registerMetrics(vu)}
}

type instance struct {
	root    *root
	vu      modules.VU
	metrics *opMetrics
}

func (m *instance) Exports() modules.Exports {
	return modules.Exports{Named: map[string]any{
		"nats":  m.natsClient,
		"kafka": m.kafkaClient,
	}}
}

// options reads a JS options object into a Go struct (fields named by their `js` tags).
func (m *instance) options(v sobek.Value, into any) error {
	if v == nil || sobek.IsUndefined(v) || sobek.IsNull(v) {
		return fmt.Errorf("options object required")
	}
	return m.vu.Runtime().ExportTo(v, into)
}
