package charttest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// Stand-in Kafka brokers and the few requests the chart tests send, on the wire: enough of
// Metadata and FindCoordinator to see which addresses a gateway hands out.

// startFakeBrokers runs n stand-in Kafka brokers on 127.0.0.1 and returns their addresses.
// Broker i has node id i, advertises every broker at its real address (as the brokers of an
// existing cluster do), names itself controller in Metadata, and names the last broker the
// coordinator of every group.
func startFakeBrokers(t *testing.T, n int) []string {
	t.Helper()
	var ls []net.Listener
	var addrs []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	for i, l := range ls {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go serveFakeBroker(c, int32(i), addrs)
			}
		}()
	}
	return addrs
}

const (
	apiMetadata        = 3
	apiFindCoordinator = 10
)

func serveFakeBroker(c net.Conn, id int32, addrs []string) {
	defer c.Close()
	for {
		req, err := readFrame(c)
		if err != nil || len(req) < 8 {
			return
		}
		apiKey := int16(binary.BigEndian.Uint16(req[0:]))
		version := int16(binary.BigEndian.Uint16(req[2:]))
		corr := binary.BigEndian.Uint32(req[4:])
		var w kafkaWriter
		w.i32(int32(corr))
		switch {
		case apiKey == apiMetadata && version == 1:
			w.i32(int32(len(addrs)))
			for n, a := range addrs {
				host, port := splitAddr(a)
				w.i32(int32(n))
				w.str(host)
				w.i32(port)
				w.i16(-1) // rack: null
			}
			w.i32(id) // controller: this broker, so a client can tell where it landed
			w.i32(0)  // no topics
		case apiKey == apiFindCoordinator && version == 1:
			host, port := splitAddr(addrs[len(addrs)-1])
			w.i32(0)  // throttle
			w.i16(0)  // no error
			w.i16(-1) // error message: null
			w.i32(int32(len(addrs) - 1))
			w.str(host)
			w.i32(port)
		default:
			return
		}
		if _, err := c.Write(w.frame()); err != nil {
			return
		}
	}
}

// kafkaMetadata sends Metadata v1 (all topics) and returns the controller's node id and the
// brokers' addresses by node id.
func kafkaMetadata(t *testing.T, addr string) (int32, map[int32]string) {
	t.Helper()
	controller, brokers, err := tryKafkaMetadata(addr)
	if err != nil {
		t.Fatal(err)
	}
	return controller, brokers
}

// tryKafkaMetadata is kafkaMetadata returning its error, for a caller that retries.
func tryKafkaMetadata(addr string) (int32, map[int32]string, error) {
	var body kafkaWriter
	body.i32(-1) // all topics
	r, err := tryKafkaCall(addr, apiMetadata, 1, body.b.Bytes())
	if err != nil {
		return 0, nil, err
	}
	brokers := map[int32]string{}
	for n := r.i32(); n > 0; n-- {
		id, host, port := r.i32(), r.str(), r.i32()
		r.str() // rack
		brokers[id] = net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	controller := r.i32()
	if r.err != nil {
		return 0, nil, fmt.Errorf("Metadata response from %s: %v", addr, r.err)
	}
	return controller, brokers, nil
}

// kafkaFindCoordinator sends FindCoordinator v1 for a group and returns the coordinator's address.
func kafkaFindCoordinator(t *testing.T, addr string) string {
	t.Helper()
	var body kafkaWriter
	body.str("chart-test-group")
	body.b.WriteByte(0) // key type: group
	r := kafkaCall(t, addr, apiFindCoordinator, 1, body.b.Bytes())
	r.i32() // throttle
	if code := r.i16(); code != 0 {
		t.Fatalf("FindCoordinator: error %d", code)
	}
	r.str() // error message
	r.i32() // node id
	host, port := r.str(), r.i32()
	if r.err != nil {
		t.Fatalf("FindCoordinator response from %s: %v", addr, r.err)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// kafkaCall sends one request (header v1) on a new connection and returns the response after
// its correlation id.
func kafkaCall(t *testing.T, addr string, apiKey, version int16, body []byte) *kafkaReader {
	t.Helper()
	r, err := tryKafkaCall(addr, apiKey, version, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tryKafkaCall(addr string, apiKey, version int16, body []byte) (*kafkaReader, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var w kafkaWriter
	w.i16(apiKey)
	w.i16(version)
	w.i32(7) // correlation id
	w.str("chart-test")
	w.b.Write(body)
	if _, err := c.Write(w.frame()); err != nil {
		return nil, fmt.Errorf("%s: %v", addr, err)
	}
	resp, err := readFrame(c)
	if err != nil {
		return nil, fmt.Errorf("%s: no response (api key %d): %v", addr, apiKey, err)
	}
	r := &kafkaReader{b: resp}
	if corr := r.i32(); corr != 7 {
		return nil, fmt.Errorf("%s: correlation id %d, want 7", addr, corr)
	}
	return r, nil
}

func readFrame(c io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	return b, err
}

func splitAddr(a string) (string, int32) {
	host, port, _ := net.SplitHostPort(a)
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

type kafkaWriter struct{ b bytes.Buffer }

func (w *kafkaWriter) i16(v int16) { _ = binary.Write(&w.b, binary.BigEndian, v) }
func (w *kafkaWriter) i32(v int32) { _ = binary.Write(&w.b, binary.BigEndian, v) }
func (w *kafkaWriter) str(s string) {
	w.i16(int16(len(s)))
	w.b.WriteString(s)
}

// frame prefixes the bytes written with their size.
func (w *kafkaWriter) frame() []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(w.b.Len()))
	return append(out, w.b.Bytes()...)
}

type kafkaReader struct {
	b   []byte
	err error
}

func (r *kafkaReader) take(n int) []byte {
	if r.err == nil && len(r.b) < n {
		r.err = io.ErrUnexpectedEOF
	}
	if r.err != nil {
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *kafkaReader) i16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *kafkaReader) i32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }

// str reads a (nullable) string; null reads as "".
func (r *kafkaReader) str() string {
	n := r.i16()
	if n < 0 {
		return ""
	}
	return string(r.take(int(n)))
}
