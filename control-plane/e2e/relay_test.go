package e2e

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// produceRelay is a relay between the gateway and a Kafka broker listener that counts the
// Produce requests (acks ≠ 0) the broker was sent and has not answered yet: in-flight as the
// broker sees it, measured outside the filter. The gateway fronts it as one more broker
// listener (localstack.Config.ExtraKafkaBrokers); it reaches the broker as the gateway does.
type produceRelay struct {
	ln          net.Listener
	dial        func() (net.Conn, error)
	outstanding atomic.Int64
	peak        atomic.Int64
	produces    atomic.Int64
}

func startProduceRelay(dial func() (net.Conn, error)) (*produceRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &produceRelay{ln: ln, dial: dial}
	go r.serve()
	return r, nil
}

func (r *produceRelay) addr() string { return r.ln.Addr().String() }

func (r *produceRelay) close() { r.ln.Close() }

// reset starts a new measurement: the peak from now on (what is outstanding now counts).
func (r *produceRelay) reset() {
	r.peak.Store(r.outstanding.Load())
	r.produces.Store(0)
}

func (r *produceRelay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.relay(c)
	}
}

func (r *produceRelay) relay(client net.Conn) {
	defer client.Close()
	broker, err := r.dial()
	if err != nil {
		return
	}
	defer broker.Close()
	var mu sync.Mutex
	pending := map[int32]bool{} // correlation ids of Produce requests awaiting their response
	done := make(chan struct{})
	go func() {
		defer close(done)
		forwardFrames(client, broker, func(f []byte) {
			if len(f) < 8 || int16(binary.BigEndian.Uint16(f)) != 0 || !produceAwaitsReply(f) {
				return
			}
			mu.Lock()
			pending[int32(binary.BigEndian.Uint32(f[4:]))] = true
			mu.Unlock()
			r.produces.Add(1)
			n := r.outstanding.Add(1)
			for p := r.peak.Load(); n > p && !r.peak.CompareAndSwap(p, n); p = r.peak.Load() {
			}
		})
		broker.Close()
	}()
	forwardFrames(broker, client, func(f []byte) {
		if len(f) < 4 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(f))
		mu.Lock()
		ok := pending[corr]
		delete(pending, corr)
		mu.Unlock()
		if ok {
			r.outstanding.Add(-1)
		}
	})
	client.Close()
	<-done
	mu.Lock()
	r.outstanding.Add(-int64(len(pending)))
	mu.Unlock()
}

// forwardFrames copies size-prefixed Kafka frames from src to dst, calling seen with each
// frame's body before it is forwarded.
func forwardFrames(src io.Reader, dst io.Writer, seen func([]byte)) {
	r := bufio.NewReader(src)
	for {
		frame, err := readKafkaFrame(r)
		if err != nil {
			return
		}
		seen(frame)
		if _, err := dst.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)); err != nil {
			return
		}
	}
}

// produceAwaitsReply reads a Produce request's acks (versions 3+): acks=0 gets no response.
// Flexible versions (9+) have tagged fields after the header's client id and a compact
// transactional id; the tagged fields are assumed empty, as every client here sends them.
func produceAwaitsReply(f []byte) bool {
	version := int16(binary.BigEndian.Uint16(f[2:]))
	at := 8
	clientID := int(int16(binary.BigEndian.Uint16(f[at:])))
	at += 2 + max(clientID, 0)
	if version >= 9 {
		at++ // header tagged fields: none
		n, w := binary.Uvarint(f[at:])
		at += w + max(int(n)-1, 0)
	} else {
		txn := int(int16(binary.BigEndian.Uint16(f[at:])))
		at += 2 + max(txn, 0)
	}
	return len(f) >= at+2 && int16(binary.BigEndian.Uint16(f[at:])) != 0
}
