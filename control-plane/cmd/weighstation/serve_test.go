package main

import (
	"strings"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

func TestKafkaBrokerFlag(t *testing.T) {
	cases := []struct {
		flag string
		want xds.KafkaBroker
		err  string
	}{
		{"b:9092=:9093", xds.KafkaBroker{Upstream: "b:9092", Listen: ":9093"}, ""},
		{"b:9092=:9093=gw:9093,mtls,upstream-tls", xds.KafkaBroker{Upstream: "b:9092", Listen: ":9093", Advertise: "gw:9093", Downstream: xds.MutualTLS, UpstreamTLS: true}, ""},
		{"b:9092=:9093,tls", xds.KafkaBroker{Upstream: "b:9092", Listen: ":9093", Downstream: xds.TLS}, ""},
		{"b:9092=:9093,tls,mtls", xds.KafkaBroker{}, `option "mtls" is not one of`},
		{"b:9092=:9093,", xds.KafkaBroker{}, `option "" is not one of`},
		{"b:9092=:9093,ssl", xds.KafkaBroker{}, `option "ssl" is not one of`},
		{"b:9092", xds.KafkaBroker{}, "is not UPSTREAM=LISTEN"},
	}
	for _, c := range cases {
		var got []xds.KafkaBroker
		err := kafkaBrokers{&got}.Set(c.flag)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.flag, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.flag, got, err, c.want)
		}
	}
}

func TestListenerFlags(t *testing.T) {
	var g xds.Gateway
	if err := (kafkaListen{&g}).Set("0.0.0.0:9092,tls,upstream-tls"); err != nil || g.KafkaListen != "0.0.0.0:9092" || g.KafkaTLS != xds.TLS || !g.KafkaUpstreamTLS {
		t.Errorf("--kafka-listen: %+v, %v", g, err)
	}
	if err := (natsTLSListen{&g}).Set("0.0.0.0:4443"); err != nil || g.NATSTLSListen != "0.0.0.0:4443" || g.NATSTLS != xds.TLS {
		t.Errorf("--nats-tls-listen: %+v, %v", g, err)
	}
	if err := (natsTLSListen{&g}).Set("0.0.0.0:4443,mtls"); err != nil || g.NATSTLS != xds.MutualTLS {
		t.Errorf("--nats-tls-listen ,mtls: %+v, %v", g, err)
	}
	if err := (natsTLSListen{&g}).Set("0.0.0.0:4443,upstream-tls"); err == nil {
		t.Error("--nats-tls-listen took upstream-tls")
	}
}

func TestKafkaClusterFlag(t *testing.T) {
	cases := []struct {
		flag string
		want xds.KafkaCluster
		err  string
	}{
		{"sasl=:9193,nodes=1-16", xds.KafkaCluster{Name: "sasl", Brokers: ":9193", FirstNode: 1, LastNode: 16}, ""},
		{"sasl=:9193,nodes=0-9,listen=:9192,bootstrap=k-0:9094+k-1:9094,advertise=gw:9193,stride=3,tls,upstream-tls",
			xds.KafkaCluster{Name: "sasl", Brokers: ":9193", FirstNode: 0, LastNode: 9, Listen: ":9192", Bootstrap: "k-0:9094,k-1:9094",
				Advertise: "gw:9193", Stride: 3, Downstream: xds.TLS, UpstreamTLS: true}, ""},
		{"sasl=:9193", xds.KafkaCluster{}, "nodes=FIRST-LAST is required"},
		{"sasl=:9193,nodes=1", xds.KafkaCluster{}, "is not FIRST-LAST"},
		{"sasl=:9193,nodes=1-4,stride=0", xds.KafkaCluster{}, "not a positive number"},
		{"sasl=:9193,nodes=1-4,port=3", xds.KafkaCluster{}, `option "port=" is not one of`},
		{"sasl=:9193,nodes=1-4,ssl", xds.KafkaCluster{}, `option "ssl" is not one of`},
		{"sasl", xds.KafkaCluster{}, "is not NAME=BROKERS"},
	}
	for _, c := range cases {
		var got []xds.KafkaCluster
		err := kafkaClusters{&got}.Set(c.flag)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.flag, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.flag, got, err, c.want)
		}
	}
}
