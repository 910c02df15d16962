package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weighstation/weighstation/load-tests/internal/hist"
)

// Write puts every form of the report in dir: summary.json, <target>.hgrm, percentiles.svg and
// .png, and report.html.
func Write(dir string, s Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, t := range s.Targets {
		if err := writeHgrm(filepath.Join(dir, t.Hgrm), t); err != nil {
			return err
		}
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	svgPath := filepath.Join(dir, "percentiles.svg")
	if err := Plot(s, svgPath, filepath.Join(dir, "percentiles.png")); err != nil {
		return err
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	if err := writeHTML(f, s, svg); err != nil {
		f.Close()
		return fmt.Errorf("report.html: %w", err)
	}
	return f.Close()
}

func writeHgrm(path string, t Target) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if t.latency == nil || t.latency.TotalCount() == 0 {
		// Nothing completed: an empty file would parse as an error, which is what it is.
		return f.Close()
	}
	if err := hist.WriteHgrm(f, t.latency); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
