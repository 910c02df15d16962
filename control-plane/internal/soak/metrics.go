package soak

import (
	"bufio"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

var promLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// Series names one metric series: its name and its protocol and tenant labels (summed over any
// other label, such as a refusal's reason).
type Series struct {
	Name, Protocol, Tenant string
}

// counters are the filter's counters the soak accounts with; every other metric it reads is a
// gauge (its latest value is what counts).
var counters = map[string]bool{
	"weighstation_messages_refused":    true,
	"weighstation_messages_accepted":   true,
	"weighstation_messages_delayed":    true,
	"weighstation_dryrun_would_refuse": true,
}

// Scraper reads Envoy's /stats/prometheus and keeps each counter's total across Envoy restarts:
// a counter that reads lower than before was reset by a restart, and what it had counted is
// kept. Call Scrape often enough, and just before Envoy is stopped, to miss nothing.
type Scraper struct {
	url string

	mu     sync.Mutex
	last   map[Series]float64 // the latest reading
	banked map[Series]float64 // counted by Envoys that have since restarted
}

func NewScraper(adminPort int) *Scraper {
	return &Scraper{
		url:  fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", adminPort),
		last: map[Series]float64{}, banked: map[Series]float64{},
	}
}

var scrapeClient = &http.Client{Timeout: 2 * time.Second}

// Scrape reads the metrics once.
func (s *Scraper) Scrape() error {
	resp, err := scrapeClient.Get(s.url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	now := map[Series]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := promLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.HasPrefix(m[1], "weighstation_") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		now[Series{Name: m[1], Protocol: label(m[2], "protocol"), Tenant: label(m[2], "tenant")}] += v
	}
	if err := sc.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.last {
		if counters[k.Name] && now[k] < v {
			s.banked[k] += v
		}
	}
	s.last = now
	return nil
}

// Total is a counter's count over the whole soak, or a gauge's latest value.
func (s *Scraper) Total(name, protocol, tenant string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := Series{Name: name, Protocol: protocol, Tenant: tenant}
	return s.banked[k] + s.last[k]
}

// Sum is the latest value of a metric summed over every protocol and tenant.
func (s *Scraper) Sum(name string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := 0.0
	for k, v := range s.last {
		if k.Name == name {
			sum += v
		}
	}
	return sum
}

func label(set, name string) string {
	i := strings.Index(set, name+`="`)
	if i < 0 {
		return ""
	}
	rest := set[i+len(name)+2:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// Run scrapes every interval until stop closes.
func (s *Scraper) Run(interval time.Duration, stop <-chan struct{}) {
	every(interval, stop, func() { _ = s.Scrape() }) // Envoy restarting: the next scrape catches up
}

// every calls f every interval until stop closes.
func every(interval time.Duration, stop <-chan struct{}, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			f()
		}
	}
}
