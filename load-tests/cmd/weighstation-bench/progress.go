package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
)

// progressLine prints the live progress: rewritten in place on a terminal, one line per second
// into a log.
type progressLine struct {
	w        io.Writer
	terminal bool
}

func newProgressLine(f *os.File) *progressLine {
	st, err := f.Stat()
	return &progressLine{w: f, terminal: err == nil && st.Mode()&os.ModeCharDevice != 0}
}

func (p *progressLine) print(pr engine.Progress) {
	active := pr.Active
	switch {
	case pr.Warmup:
		active = "warm-up"
	case active == "":
		active = "draining"
	}
	line := fmt.Sprintf("[%4.0fs/%.0fs] %-8s %7.0f/s  p99 %8.3f ms  refused %d  errors %d  in-flight %d",
		pr.Elapsed.Seconds(), pr.Total.Seconds(), active, pr.Rate, float64(pr.P99)/float64(time.Millisecond),
		pr.Refused, pr.Errors, pr.InFlight)
	if p.terminal {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// done ends a line rewritten in place.
func (p *progressLine) done() {
	if p.terminal {
		fmt.Fprintln(p.w)
	}
}
