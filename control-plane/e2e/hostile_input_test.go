package e2e

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileInputs are what a broken or hostile client sends: random bytes, NATS lines that do not
// parse or lie about their sizes, Kafka frames with absurd or negative lengths and headers cut
// short.
var hostileInputs = []func(r *rand.Rand) (nats bool, b []byte){
	func(r *rand.Rand) (bool, []byte) { return r.IntN(2) == 0, randomBytes(r, 1+r.IntN(4096)) },
	func(r *rand.Rand) (bool, []byte) { return true, []byte("PUB x 999999999999\r\n") },
	func(r *rand.Rand) (bool, []byte) { return true, []byte("PUB x -5\r\nhello\r\n") },
	func(r *rand.Rand) (bool, []byte) {
		return true, append([]byte("CONNECT {\"user\":"), randomBytes(r, 2000)...)
	},
	func(r *rand.Rand) (bool, []byte) {
		line := []byte("SUB ")
		for range 5000 {
			line = append(line, 'a')
		}
		return true, append(line, "\r\n"...)
	},
	func(r *rand.Rand) (bool, []byte) { return true, []byte("HPUB x 10 5\r\n0123456789\r\n") },
	func(r *rand.Rand) (bool, []byte) { return false, binary.BigEndian.AppendUint32(nil, 0x7fffffff) },
	func(r *rand.Rand) (bool, []byte) { return false, binary.BigEndian.AppendUint32(nil, 0xfffffff0) },
	func(r *rand.Rand) (bool, []byte) {
		// A Produce (key 0, v9) header whose client id runs past the frame.
		f := binary.BigEndian.AppendUint32(nil, 12)
		f = binary.BigEndian.AppendUint16(f, 0)
		f = binary.BigEndian.AppendUint16(f, 9)
		f = binary.BigEndian.AppendUint32(f, r.Uint32())
		f = binary.BigEndian.AppendUint16(f, 500)
		return false, append(f, randomBytes(r, 64)...)
	},
	func(r *rand.Rand) (bool, []byte) {
		// A frame of random api key and version with a random body.
		body := randomBytes(r, 8+r.IntN(1024))
		return false, append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	},
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// A minute of random and malformed NATS lines and Kafka frames from many short connections
// (300 a second, 18,000 in all): Envoy stays up, its resident memory ends within 64 MiB of where it started,
// and a well-behaved client is served afterwards.
func TestHostileInputLeavesTheGatewayUpAndItsMemoryFlat(t *testing.T) {
	const window, most, workers = 60 * time.Second, 18000, 6
	before := envoyRSS(t)
	pid := stack.Envoy.PID()
	deadline := time.Now().Add(window)
	var conns atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			pace := time.NewTicker(workers * window / most)
			defer pace.Stop()
			for ; time.Now().Before(deadline) && conns.Add(1) <= most; <-pace.C {
				isNATS, b := hostileInputs[r.IntN(len(hostileInputs))](r)
				port := ports.Kafka
				if isNATS {
					port = ports.NATS
				}
				c, err := net.DialTimeout("tcp", addr(port), 2*time.Second)
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
				_, _ = c.Write(b)
				_, _ = c.Read(make([]byte, 512))
				c.Close()
			}
		}()
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	after := envoyRSS(t)
	t.Logf("%d hostile connections in %v: Envoy RSS %d MiB before, %d MiB after", min(conns.Load(), most), window, before>>20, after>>20)
	if stack.Envoy.PID() != pid {
		t.Fatalf("Envoy restarted (pid %d, was %d)", stack.Envoy.PID(), pid)
	}
	if grew := after - before; grew >= 64<<20 {
		t.Errorf("Envoy grew by %d MiB under hostile input (bound 64 MiB)", grew>>20)
	}
	publishAndReceive(t, gatewayNATS(t, "acme", "acme-secret"), uniqueSubject("after-hostile"), 10)
}
