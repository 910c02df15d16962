package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// settleTimeout bounds the wait for a tenant's earlier load to finish.
const settleTimeout = 90 * time.Second

// settle waits until the gateway holds nothing of tenant's: no open connections and no held
// messages. A client that sent over its limit in delay mode and closed leaves its messages in
// the gateway's and the kernel's buffers, and the gateway still delivers them at the tenant's
// rate — sharing that rate with whatever the next measurement sends as the same tenant.
func (s *suite) settle(tenant string) {
	url := "http://" + s.stack.Addr("ADMIN_PORT") + "/stats/prometheus"
	start := time.Now()
	for time.Since(start) < settleTimeout && s.ctx.Err() == nil {
		busy, err := tenantBusy(url, tenant)
		if err == nil && busy == 0 {
			if waited := time.Since(start); waited > time.Second {
				fmt.Fprintf(os.Stderr, "  waited %s for %s's earlier load to drain\n", waited.Round(time.Second), tenant)
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "  %s still has connections or held messages after %s; measuring anyway\n", tenant, settleTimeout)
}

// tenantBusy sums the tenant's open connections and held messages over both protocols.
func tenantBusy(url, tenant string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	label := `tenant="` + tenant + `"`
	var busy float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "weighstation_connections_active{") && !strings.HasPrefix(line, "weighstation_queue_depth{") {
			continue
		}
		if !strings.Contains(line, label) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		busy += v
	}
	return busy, sc.Err()
}
