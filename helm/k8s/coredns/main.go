// Command coredns is CoreDNS built with only the plugins the chart's single-node test cluster
// needs for cluster DNS. No container image can be pulled here, so the node image gets a CoreDNS
// built from the Go module proxy instead; taking only these plugins (not CoreDNS's full
// plugin.cfg with its cloud backends) keeps the build and the binary small.
//
// This is CoreDNS's supported way of a custom build: select the directives with
// dnsserver.SetDirectives, import the plugin packages that register them, and call coremain.Run.
package main

import (
	"log"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is the execution order: the order of these plugins in CoreDNS's plugin.cfg.
// forward is kept even though upstreams are unreachable here, as a Corefile may name it.
var directives = []string{
	"reload",
	"ready",
	"health",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"kubernetes",
	"loop",
	"forward",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		log.Fatal(err)
	}
	coremain.Run()
}
