package soak

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// ProbeConnections is how many connections each 2 GiB probe opens at once: enough that their
// cost stands out of Envoy's RSS noise.
const ProbeConnections = 32

// LengthProbe is what 2 GiB lengths cost Envoy: its RSS with ProbeConnections idle connections
// open, and at its peak while as many connections each announce 2 GiB (a NATS PUB size, a Kafka
// frame length) and stream data at it.
type LengthProbe struct {
	Protocol          string
	Connections       int
	BaseMiB, IdleMiB  float64 // before; with the idle connections open
	PeakMiB           float64 // the highest reading while the 2 GiB senders streamed
	BytesSentPerConn  int64   // the most one sender wrote before the gateway stopped it or it gave up
	Closed            int     // senders the gateway closed
	ExtraPerConnKiB   float64 // (peak − idle) / connections: what a 2 GiB length costs over an idle connection
	BufferLimitKiB    float64 // Envoy's per_connection_buffer_limit_bytes
	WithinBufferLimit bool
	Opened            int // 2 GiB senders that got through the handshake
}

// probeLengths measures a 2 GiB length on each protocol against the Envoy whose pid is given.
func probeLengths(natsAddr, kafkaAddr string, pid func() int, bufferLimitKiB float64) []LengthProbe {
	natsOpen := func() (net.Conn, error) {
		c, _, _, err := natsHandshake(natsAddr, TenantProbe)
		if c == nil && err == nil {
			err = net.ErrClosed
		}
		return c, err
	}
	kafkaOpen := func() (net.Conn, error) { return net.DialTimeout("tcp", kafkaAddr, time.Second) }
	natsBig := func(c net.Conn) { _, _ = c.Write([]byte("PUB soak.probe.big 2147483648\r\n")) }
	kafkaBig := func(c net.Conn) {
		h := binary.BigEndian.AppendUint32(nil, 0x7fffffff)
		h = append(h, 0, 0, 0, 9, 0, 0, 0, 1)
		h = binary.BigEndian.AppendUint16(h, uint16(len(TenantProbe+"-big")))
		_, _ = c.Write(append(h, TenantProbe+"-big"...))
	}
	return []LengthProbe{
		probeOne("nats", natsOpen, natsBig, pid, bufferLimitKiB),
		probeOne("kafka", kafkaOpen, kafkaBig, pid, bufferLimitKiB),
	}
}

func probeOne(protocol string, open func() (net.Conn, error), announce func(net.Conn), pid func() int, bufferLimitKiB float64) LengthProbe {
	p := LengthProbe{Protocol: protocol, Connections: ProbeConnections, BufferLimitKiB: bufferLimitKiB}
	openAll := func() []net.Conn {
		var conns []net.Conn
		for range ProbeConnections {
			c, err := open()
			if err != nil {
				continue
			}
			conns = append(conns, c)
		}
		return conns
	}
	closeAll := func(conns []net.Conn) {
		for _, c := range conns {
			c.Close()
		}
	}
	p.BaseMiB = rssMiB(pid())
	idle := openAll()
	time.Sleep(time.Second)
	p.IdleMiB = rssMiB(pid())
	closeAll(idle)
	time.Sleep(time.Second)

	big := openAll()
	p.Opened = len(big)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stop := make(chan struct{})
	for _, c := range big {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			announce(c)
			n, closed := streamUntilStopped(c, bigStreamFor)
			mu.Lock()
			defer mu.Unlock()
			p.BytesSentPerConn = max(p.BytesSentPerConn, n)
			if closed {
				p.Closed++
			}
		}(c)
	}
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				rss := rssMiB(pid())
				mu.Lock()
				p.PeakMiB = max(p.PeakMiB, rss)
				mu.Unlock()
			}
		}
	}()
	wg.Wait()
	close(stop)
	mu.Lock()
	defer mu.Unlock()
	// The gateway may have closed every sender before the first 100 ms reading.
	p.PeakMiB = max(p.PeakMiB, rssMiB(pid()))
	closeAll(big)
	if p.Opened > 0 {
		p.ExtraPerConnKiB = max(0, (p.PeakMiB-p.IdleMiB)*1024/float64(p.Opened))
	}
	p.WithinBufferLimit = p.ExtraPerConnKiB <= bufferLimitKiB
	return p
}
