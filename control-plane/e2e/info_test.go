package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The first INFO a client reads names the gateway listener it reached — the plaintext one or
// the TLS-first one, each advertising its own address — and nothing of nats-server.
func TestEachNATSListenerAdvertisesItselfInINFO(t *testing.T) {
	cases := []struct {
		name string
		port int
		dial func(string) (net.Conn, error)
	}{
		{"plaintext", ports.NATS, func(a string) (net.Conn, error) { return net.DialTimeout("tcp", a, 5*time.Second) }},
		{"TLS first", ports.NATSTLS, func(a string) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", a, clientTLS(t, ""))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := c.dial(addr(c.port))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(line, strconv.Itoa(ports.NATSUpstream)) {
				t.Errorf("nats-server's port is in the INFO: %s", line)
			}
			var info struct {
				Host        string   `json:"host"`
				Port        int      `json:"port"`
				IP          *string  `json:"ip"`
				ConnectURLs []string `json:"connect_urls"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			if got := net.JoinHostPort(info.Host, strconv.Itoa(info.Port)); got != addr(c.port) || info.IP != nil {
				t.Errorf("host:port %s (ip %v), want the listener %s and no ip", got, info.IP, addr(c.port))
			}
			if !slices.Equal(info.ConnectURLs, []string{addr(c.port)}) {
				t.Errorf("connect_urls %v, want the listener's advertised address %s", info.ConnectURLs, addr(c.port))
			}
		})
	}
}
