package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestTenantBusyCountsOnlyThatTenantsConnectionsAndHeldMessages(t *testing.T) {
	const stats = `# TYPE weighstation_connections_active gauge
weighstation_connections_active{protocol="nats",tenant="globex"} 2
weighstation_connections_active{protocol="kafka",tenant="globex"} 0
weighstation_connections_active{protocol="nats",tenant="acme"} 7
weighstation_queue_depth{protocol="nats",tenant="globex"} 1
weighstation_messages_accepted{protocol="nats",tenant="globex"} 5000
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, stats) }))
	defer srv.Close()
	for tenant, want := range map[string]float64{"globex": 3, "acme": 7, "initech": 0} {
		got, err := tenantBusy(srv.URL, tenant)
		if err != nil || got != want {
			t.Errorf("%s: busy %v (%v), want %v", tenant, got, err, want)
		}
	}
}
