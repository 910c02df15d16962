package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultControlPlane is where `decisions` and `top` find the control plane's HTTP listener.
func defaultControlPlane() string {
	return envOr("WEIGHSTATION_CONTROL_PLANE", "http://127.0.0.1:18080")
}

// decisionsCmd prints the control plane's decision log as JSON lines, oldest first; --follow
// keeps printing new ones as the gateway makes them.
func decisionsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("decisions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cp := fs.String("control-plane", defaultControlPlane(), "URL of the control plane's HTTP listener (env WEIGHSTATION_CONTROL_PLANE)")
	tenant := fs.String("tenant", "", "only this tenant")
	protocol := fs.String("protocol", "", "only nats or kafka")
	reason := fs.String("reason", "", "only this reason: size, rate, inflight, queue, connections, permission, or delayed")
	subject := fs.String("subject", "", "only subjects or topics containing this")
	since := fs.Duration("since", 15*time.Minute, "only decisions made this recently")
	follow := fs.Bool("follow", false, "keep printing decisions as they are made (until interrupted)")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	switch *reason {
	case "", "size", "rate", "inflight", "queue", "connections", "permission", "delayed":
	default:
		fmt.Fprintf(stderr, "weighstation decisions: --reason %q: want size, rate, inflight, queue, connections, permission or delayed\n", *reason)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	q := url.Values{}
	for k, v := range map[string]string{"tenant": *tenant, "protocol": *protocol, "reason": *reason, "subject": *subject} {
		if v != "" {
			q.Set(k, v)
		}
	}
	q.Set("since", since.String())
	after, following := int64(-1), false
	for {
		if following {
			// After the first answer: only what is new, held open until there is some.
			q.Set("after", strconv.FormatInt(after, 10))
			q.Set("wait", "10s")
		}
		last, err := fetchDecisions(ctx, strings.TrimRight(*cp, "/")+"/decisions?"+q.Encode(), stdout)
		if ctx.Err() != nil {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "weighstation decisions: %v\n", err)
			if !*follow {
				return 1
			}
			select {
			case <-ctx.Done():
				return 0
			case <-time.After(time.Second):
			}
			continue
		}
		if !*follow {
			return 0
		}
		after, following = last, true
	}
}

// fetchDecisions copies one answer's lines to out and returns the last sequence number seen.
func fetchDecisions(ctx context.Context, u string, out io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	last, err := strconv.ParseInt(resp.Header.Get("X-Weighstation-Last-Seq"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("answer without X-Weighstation-Last-Seq: is %s a weighstation control plane?", u)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(out, sc.Text())
	}
	return last, sc.Err()
}
