package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// kafkaClusterUsage is --kafka-cluster's syntax.
const kafkaClusterUsage = "NAME=BROKERS,nodes=FIRST-LAST,listen=ADDRESS,bootstrap=HOST:PORT[+HOST:PORT…][,advertise=HOST:PORT][,stride=N][,tls|,mtls][,upstream-tls]"

// kafkaClusters collects repeated --kafka-cluster flags: one listener kind of a Kafka cluster
// whose brokers the gateway discovers. BROKERS is the host:port of node FIRST's listener; node
// n listens on its port + (n − FIRST)·stride.
type kafkaClusters struct{ list *[]xds.KafkaCluster }

func (k kafkaClusters) String() string {
	if k.list == nil {
		return ""
	}
	names := make([]string, 0, len(*k.list))
	for _, c := range *k.list {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

func (k kafkaClusters) Set(v string) error {
	head, rest, _ := strings.Cut(v, ",")
	name, brokers, ok := strings.Cut(head, "=")
	if !ok || name == "" || brokers == "" {
		return fmt.Errorf("%q is not %s", v, kafkaClusterUsage)
	}
	c := xds.KafkaCluster{Name: name, Brokers: brokers}
	var tlsOptions []string
	nodes := false
	for _, o := range strings.Split(rest, ",") {
		if rest == "" {
			break
		}
		key, value, hasValue := strings.Cut(o, "=")
		var err error
		switch {
		case !hasValue:
			tlsOptions = append(tlsOptions, o)
		case key == "nodes":
			nodes = true
			c.FirstNode, c.LastNode, err = nodeRange(value)
		case key == "listen":
			c.Listen = value
		case key == "bootstrap":
			c.Bootstrap = strings.ReplaceAll(value, "+", ",")
		case key == "advertise":
			c.Advertise = value
		case key == "stride":
			c.Stride, err = strconv.Atoi(value)
			if err == nil && c.Stride < 1 {
				err = fmt.Errorf("stride %d is not a positive number", c.Stride)
			}
		default:
			err = fmt.Errorf("option %q is not one of nodes=, listen=, bootstrap=, advertise=, stride=", key+"=")
		}
		if err != nil {
			return fmt.Errorf("%q: %w", v, err)
		}
	}
	if !nodes {
		return fmt.Errorf("%q: nodes=FIRST-LAST is required: the node ids the gateway gives ports", v)
	}
	var err error
	if c.Downstream, c.UpstreamTLS, err = kafkaTLSOptions(strings.Join(tlsOptions, ","), len(tlsOptions) > 0); err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	*k.list = append(*k.list, c)
	return nil
}

// nodeRange reads FIRST-LAST.
func nodeRange(v string) (first, last int32, err error) {
	a, b, ok := strings.Cut(v, "-")
	f, err1 := strconv.ParseInt(a, 10, 32)
	l, err2 := strconv.ParseInt(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("nodes=%s is not FIRST-LAST (node ids)", v)
	}
	return int32(f), int32(l), nil
}
