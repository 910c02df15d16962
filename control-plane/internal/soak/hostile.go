package soak

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strings"
	"sync"
	"time"
)

// Hostile clients run beside the load, through the gateway: partial frames held open
// (slowloris), a 2 GiB NATS payload size and a 2 GiB Kafka frame length followed by streamed
// bytes, random bytes after a valid handshake, and CONNECT floods over a tenant's connection
// limit. None may panic the filter, hold more than the connection's buffer, or touch the other
// tenants' accounts.
type hostile struct {
	natsAddr, kafkaAddr string

	mu sync.Mutex
	// Counts for the report.
	slowlorisOpen, slowlorisPeak, slowlorisClosedByGateway int
	bigNATS, bigNATSClosed, bigKafka, bigKafkaClosed       int
	// The most bytes one 2 GiB sender wrote before it was stopped (socket buffers included).
	bigNATSBytesMax, bigKafkaBytesMax   int64
	bigNATSReplies                      map[string]int
	garbage, garbageClosed              int
	floods, floodAdmitted, floodRefused int
	floodAdmittedMax                    int // the most one flood had admitted at once
	unavailableCount                    int
	unavailableWhy                      []string
}

const (
	slowlorisMax = 20
	floodSize    = 8 // connections per flood; the hostile tenant's limit is 5
	hostileEvery = 2 * time.Second
	// bigStreamFor is how long a 2 GiB sender keeps writing before it gives up.
	bigStreamFor = 3 * time.Second
)

func (h *hostile) run(ctx context.Context) {
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	acts := []func(){h.bigNATSPayload, h.bigKafkaFrame, h.garbageAfterHandshake, h.connectFlood}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(hostileEvery):
		}
		slow = h.keepSlowloris(slow)
		acts[i%len(acts)]()
	}
}

// unavailable counts a hostile client that could not get as far as its attack: the gateway or
// the broker behind it was down (a fault), or it refused the connection (a flood).
func (h *hostile) unavailable(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unavailableCount++
	if len(h.unavailableWhy) < 5 {
		h.unavailableWhy = append(h.unavailableWhy, why)
	}
}

// keepSlowloris drops the held connections the gateway closed and opens new ones up to
// slowlorisMax, each a partial frame: half a NATS CONNECT, or a Kafka request missing its body.
func (h *hostile) keepSlowloris(conns []net.Conn) []net.Conn {
	live := conns[:0]
	closed := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err != nil && !isTimeout(err) {
			c.Close()
			closed++
			continue
		}
		live = append(live, c)
	}
	for len(live) < slowlorisMax {
		var c net.Conn
		var err error
		if len(live)%2 == 0 {
			if c, err = net.DialTimeout("tcp", h.natsAddr, time.Second); err == nil {
				_, err = c.Write([]byte(`CONNECT {"user":"soak-hostile","pa`))
			}
		} else if c, err = net.DialTimeout("tcp", h.kafkaAddr, time.Second); err == nil {
			_, err = c.Write([]byte{0, 0, 0, 100, 0, 0, 0, 7})
		}
		if err != nil {
			if c != nil {
				c.Close()
			}
			break // the gateway is restarting: try again next round
		}
		live = append(live, c)
	}
	h.mu.Lock()
	h.slowlorisOpen += len(live) - (len(conns) - closed)
	h.slowlorisClosedByGateway += closed
	h.slowlorisPeak = max(h.slowlorisPeak, len(live))
	h.mu.Unlock()
	return live
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// natsHandshake connects through the gateway as user and returns the connection once nats-server
// answered its PING, or the first -ERR line.
func natsHandshake(address, user string) (net.Conn, *bufio.Reader, string, error) {
	c, err := net.DialTimeout("tcp", address, time.Second)
	if err != nil {
		return nil, nil, "", err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		c.Close()
		return nil, nil, "", fmt.Errorf("no INFO: %w", err)
	}
	connect := fmt.Sprintf("CONNECT {\"user\":%q,\"pass\":%q,\"verbose\":false,\"pedantic\":false,\"headers\":true,\"protocol\":1}\r\nPING\r\n", user, user+"-secret")
	if _, err := c.Write([]byte(connect)); err != nil {
		c.Close()
		return nil, nil, "", err
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, nil, "", err
		}
		switch {
		case strings.HasPrefix(line, "PONG"):
			_ = c.SetDeadline(time.Time{})
			return c, r, "", nil
		case strings.HasPrefix(line, "-ERR"):
			c.Close()
			return nil, nil, strings.TrimSpace(line), nil
		}
	}
}

// streamUntilStopped writes zeros for up to d and returns how many bytes were written and
// whether the gateway closed the connection (a write failed) meanwhile.
func streamUntilStopped(c net.Conn, d time.Duration) (int64, bool) {
	chunk := make([]byte, 64<<10)
	var n int64
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		_ = c.SetWriteDeadline(time.Now().Add(250 * time.Millisecond))
		w, err := c.Write(chunk)
		n += int64(w)
		if err != nil && !isTimeout(err) {
			return n, true
		}
	}
	return n, false
}

// bigNATSPayload announces a 2 GiB payload and streams it.
func (h *hostile) bigNATSPayload() {
	c, r, refused, err := natsHandshake(h.natsAddr, TenantHostile)
	if err != nil || c == nil {
		h.unavailable(refused + errString(err))
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte("PUB soak.hostile.big 2147483648\r\n"))
	n, closed := streamUntilStopped(c, bigStreamFor)
	// What the gateway said: the first -ERR after the INFO and PONG of the handshake.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	reply := ""
	for {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "-ERR") {
			reply = strings.TrimSpace(line)
		}
		if err != nil || reply != "" {
			break
		}
	}
	h.recordBig(true, n, closed, reply)
}

// bigKafkaFrame sends a frame length of 2³¹−1 and streams the frame.
func (h *hostile) bigKafkaFrame() {
	c, err := net.DialTimeout("tcp", h.kafkaAddr, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	header := binary.BigEndian.AppendUint32(nil, 0x7fffffff)
	header = append(header, 0, 0, 0, 9, 0, 0, 0, 1) // Produce v9, correlation id 1
	header = binary.BigEndian.AppendUint16(header, uint16(len(TenantHostile+"-big")))
	header = append(header, TenantHostile+"-big"...)
	_, _ = c.Write(header)
	n, closed := streamUntilStopped(c, bigStreamFor)
	h.recordBig(false, n, closed, "")
}

func (h *hostile) recordBig(nats bool, n int64, closed bool, reply string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if nats {
		h.bigNATS++
		if closed {
			h.bigNATSClosed++
		}
		if h.bigNATSReplies == nil {
			h.bigNATSReplies = map[string]int{}
		}
		h.bigNATSReplies[reply]++
		h.bigNATSBytesMax = max(h.bigNATSBytesMax, n)
	} else {
		h.bigKafka++
		if closed {
			h.bigKafkaClosed++
		}
		h.bigKafkaBytesMax = max(h.bigKafkaBytesMax, n)
	}
}

// garbageAfterHandshake completes a handshake (NATS CONNECT/PONG, Kafka ApiVersions) and then
// sends 4 KiB of random bytes.
func (h *hostile) garbageAfterHandshake() {
	junk := make([]byte, 4096)
	_, _ = rand.Read(junk)
	closedAfter := func(c net.Conn) bool {
		_, _ = c.Write(junk)
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return !isTimeout(err)
			}
		}
	}
	if c, _, _, err := natsHandshake(h.natsAddr, TenantHostile); err == nil && c != nil {
		h.recordGarbage(closedAfter(c))
		c.Close()
	}
	c, err := net.DialTimeout("tcp", h.kafkaAddr, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	id := TenantHostile + "-junk"
	req := []byte{0, 18, 0, 0, 0, 0, 0, 1} // ApiVersions v0, correlation id 1
	req = binary.BigEndian.AppendUint16(req, uint16(len(id)))
	req = append(binary.BigEndian.AppendUint32(nil, uint32(len(req)+len(id))), append(req, id...)...)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(req); err != nil {
		return
	}
	size := make([]byte, 4)
	if _, err := io.ReadFull(c, size); err != nil {
		h.unavailable("kafka ApiVersions: " + err.Error())
		return
	}
	resp := make([]byte, binary.BigEndian.Uint32(size))
	if _, err := io.ReadFull(c, resp); err != nil {
		h.unavailable("kafka ApiVersions: " + err.Error())
		return
	}
	h.recordGarbage(closedAfter(c))
}

func (h *hostile) recordGarbage(closed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.garbage++
	if closed {
		h.garbageClosed++
	}
}

// connectFlood opens floodSize connections of the hostile tenant at once (its limit is 5) and
// counts how many the gateway admitted.
func (h *hostile) connectFlood() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	admitted, refused := 0, 0
	for range floodSize {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, errLine, err := natsHandshake(h.natsAddr, TenantHostile)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case c != nil:
				admitted++
				conns = append(conns, c)
			case errLine != "" || err != nil:
				refused++
			}
		}()
	}
	wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.floods++
	h.floodAdmitted += admitted
	h.floodRefused += refused
	h.floodAdmittedMax = max(h.floodAdmittedMax, admitted)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
