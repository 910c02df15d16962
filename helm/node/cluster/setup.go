package cluster

import (
	"fmt"
	"io"
	"time"
)

// Setup is the whole setup on a fresh node: the brokers, the chart, `helm test`, the team. It
// prints what became ready when to log.
func (k *Kube) Setup(chartDir string, t Topology, im Images, log io.Writer) (*Gateway, error) {
	natsReady, kafkaReady, err := k.InstallBrokers(t, im)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "ready: %d nats-server pods in %.1fs, %d Kafka brokers in %.1fs\n", t.NATS, natsReady.Seconds(), t.Kafka, kafkaReady.Seconds())
	g, err := k.InstallChart(chartDir, t, im)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "ready: the chart (%d control planes, %d Envoys) %.1fs after helm install\n", t.ControlPlanes, t.Envoys, g.ReadyAfter.Seconds())
	if _, err := k.RunHelm("test", Release, "-n", GatewayNS, "--logs"); err != nil {
		return nil, err
	}
	if err := k.SetUpTeam(); err != nil {
		return nil, err
	}
	return g, k.waitProgrammed("orders", time.Minute)
}

// waitProgrammed waits for a team-a LimitPolicy's Programmed condition, as its team sees it.
func (k *Kube) waitProgrammed(name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, _ := k.AsEditor("-n", TeamNS, "get", "limitpolicy", name, "-o", `jsonpath={.status.conditions[?(@.type=="Programmed")].status}`)
		if out == "True" {
			return nil
		}
		if time.Now().After(deadline) {
			describe, _ := k.AsEditor("-n", TeamNS, "describe", "limitpolicy", name)
			return fmt.Errorf("LimitPolicy %s not Programmed after %v:\n%s", name, timeout, describe)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
