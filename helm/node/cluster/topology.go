package cluster

// Topology is how much runs: the smoke `make test` runs, or the full one of the table and
// `make run-k8s`.
type Topology struct {
	Name                  string
	NATS, Kafka           int // nats-servers, Kafka brokers
	Envoys, ControlPlanes int
	DrainSeconds          int
}

var (
	Smoke = Topology{Name: "smoke", NATS: 1, Kafka: 1, Envoys: 2, ControlPlanes: 2, DrainSeconds: 5}
	Full  = Topology{Name: "full", NATS: 3, Kafka: 3, Envoys: 3, ControlPlanes: 2, DrainSeconds: 10}
)
