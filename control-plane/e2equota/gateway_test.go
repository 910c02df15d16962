package e2equota

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// broker counts, at nats-server (a subscriber of no tenant, connected around the gateway),
// what each gateway replica let through: every payload starts with "<replica>-".
type broker struct {
	mu       sync.Mutex
	arrivals [][]time.Time // by replica
}

func countAtBroker(t *testing.T, p localstack.Ports, subject string, replicas int) *broker {
	t.Helper()
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", p.NATSUpstream),
		nats.UserInfo(localstack.BaselineNATSUser, localstack.BaselineNATSUser+"-secret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b := &broker{arrivals: make([][]time.Time, replicas)}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		r, _, _ := strings.Cut(string(m.Data), "-")
		i, err := strconv.Atoi(r)
		if err != nil || i < 0 || i >= replicas {
			return
		}
		b.mu.Lock()
		b.arrivals[i] = append(b.arrivals[i], time.Now())
		b.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return b
}

// between counts what replica (-1: every replica) delivered in [from, to).
func (b *broker) between(replica int, from, to time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for i, arrivals := range b.arrivals {
		if replica >= 0 && i != replica {
			continue
		}
		for _, at := range arrivals {
			if !at.Before(from) && at.Before(to) {
				n++
			}
		}
	}
	return n
}

// publishLoad has conns[i] connections of tenant on replica i each publish rate messages a
// second on subject, open loop, until the test ends (or ten minutes).
func publishLoad(t *testing.T, p localstack.Ports, tenant, subject string, conns []int, rate float64) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Publishers stop before the connections close (cleanups run last first).
	var ncs []*nats.Conn
	t.Cleanup(func() {
		stop()
		wg.Wait()
		for _, nc := range ncs {
			nc.Close()
		}
	})
	for replica, n := range conns {
		for c := range n {
			nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", p.NATS+replica), nats.UserInfo(tenant, tenant+"-secret"),
				nats.FlusherTimeout(30*time.Second), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
			if err != nil {
				t.Fatalf("connecting %s to replica %d: %v", tenant, replica, err)
			}
			ncs = append(ncs, nc)
			prefix := fmt.Sprintf("%d-%d-", replica, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				for n := 0; ctx.Err() == nil && time.Since(start) < 10*time.Minute; n++ {
					time.Sleep(time.Until(start.Add(time.Duration(float64(n) / rate * float64(time.Second)))))
					// A refusal closes nothing in reject mode: the filter answers -ERR and the
					// connection goes on.
					_ = nc.Publish(subject, []byte(prefix+strconv.Itoa(n)))
				}
			}()
		}
	}
}

// stat reads one of the filter's stats from a replica's admin /stats; one not defined yet reads 0.
func stat(p localstack.Ports, replica int, name string) (float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats?filter=%s", p.Admin+replica, "^wasmcustom."+name+"$"))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "wasmcustom."+name+": "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, nil
}

// fallbackTimeline samples every replica's weighstation_quota_fallback gauge, and the share of
// the tenant's limit it enforces, every 50 ms.
type fallbackTimeline struct {
	mu      sync.Mutex
	samples []fallbackSample
	err     error
}

type fallbackSample struct {
	at        time.Time
	fallbacks []bool    // by replica
	shares    []float64 // by replica: its share of the limit, 1/N on fallback
}

func sampleFallbacks(t *testing.T, p localstack.Ports, replicas int, tenant string) *fallbackTimeline {
	ft := &fallbackTimeline{}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s := fallbackSample{at: time.Now(), fallbacks: make([]bool, replicas), shares: make([]float64, replicas)}
			for i := range replicas {
				v, err := stat(p, i, "weighstation_quota_fallback")
				ppm, shareErr := stat(p, i, "weighstation_quota_share_ppm.protocol.nats.tenant."+tenant)
				if err = errors.Join(err, shareErr); err != nil {
					ft.mu.Lock()
					ft.err = err
					ft.mu.Unlock()
				}
				s.fallbacks[i], s.shares[i] = v == 1, ppm/1e6
			}
			ft.mu.Lock()
			ft.samples = append(ft.samples, s)
			ft.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return ft
}

// after is the samples taken from `from` on.
func (ft *fallbackTimeline) after(from time.Time) []fallbackSample {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var out []fallbackSample
	for _, s := range ft.samples {
		if !s.at.Before(from) {
			out = append(out, s)
		}
	}
	return out
}

// lastSample is the latest sample.
func (ft *fallbackTimeline) lastSample() (fallbackSample, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if len(ft.samples) == 0 {
		return fallbackSample{}, ft.err
	}
	return ft.samples[len(ft.samples)-1], ft.err
}

func (s fallbackSample) count() int {
	n := 0
	for _, f := range s.fallbacks {
		if f {
			n++
		}
	}
	return n
}
