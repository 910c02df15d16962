package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"time"
)

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms":    func(us int64) string { return fmt.Sprintf("%.3f", float64(us)/1000) },
	"ratio": func(r float64) string { return fmt.Sprintf("%.2f×", r) },
	"rate":  func(r float64) string { return fmt.Sprintf("%.0f", r) },
	"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>weighstation-bench: {{.S.Scenario}} at {{.S.Rate}}/s</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222 }
table { border-collapse: collapse; margin: 1rem 0 } td, th { border: 1px solid #ccc; padding: .25rem .6rem; text-align: right }
th:first-child, td:first-child { text-align: left } .bad { background: #fdd; padding: .5rem 1rem; border-left: 4px solid #c00 }
.ok { background: #efe; padding: .5rem 1rem; border-left: 4px solid #2a2 } svg { max-width: 100%; height: auto } small { color: #666 }
</style></head><body>
<h1>{{.S.Scenario}} at {{.S.Rate}}/s</h1>
<p>{{.S.Description}}. {{.S.Arrivals}} arrivals, {{.S.Duration}} measured after {{.S.Warmup}} warm-up{{if .S.Phase}}, targets alternating every {{.S.Phase}}{{end}};
{{.S.Connections}} connections per target, {{.S.MessageBytes}}-byte messages. Started {{when .S.StartedAt}}.</p>
<p>Machine: {{.S.Machine}}.</p>
{{if .S.Valid}}<p class="ok">The harness kept its schedule: started operations {{ms .S.Generator.LagMicros.P99}} ms late at p99, {{.S.Generator.MissedSchedule}} more than 1 ms late, none dropped.</p>
{{else}}<p class="bad"><b>Invalid run.</b> {{range .S.InvalidReasons}}{{.}}. {{end}}These figures describe the harness, not the target.</p>{{end}}
{{range $t := .S.Targets}}{{with $t.Limited}}<p class="bad"><b>{{.Headline $t.Name}}.</b> Its percentiles below are of the operations it admitted, not its latency at the offered rate, and no ratio is drawn with it.{{range .Reasons}}<br>told {{.Count}} times (warm-up included): <code>{{.Sample}}</code>{{end}}</p>{{end}}{{end}}

<h2>Latency from intended send time (ms)</h2>
<table><tr><th>target</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>achieved/s</th><th>sent</th><th>acked</th><th>refused</th><th>errors</th><th>timeouts</th><th>dropped</th></tr>
{{range .S.Targets}}<tr><td>{{.Name}}{{if .Limited}} (admitted only){{end}} <small>{{.Address}}</small></td>{{range .LatencyMicros.Named}}<td>{{ms .Micro}}</td>{{end}}
<td>{{rate .AchievedRate}}</td><td>{{.Sent}}</td><td>{{.Acked}}</td><td>{{.Refused}}</td><td>{{.Errors}}</td><td>{{.Timeouts}}</td><td>{{.Dropped}}</td></tr>
{{end}}</table>
{{if .S.Ratios}}<h2>Ratios</h2>
<table><tr><th>ratio</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th></tr>
{{range .S.Ratios}}<tr><td>{{.Target}} / {{.Baseline}}</td>{{range .Named}}<td>{{ratio .Value}}</td>{{end}}</tr>{{end}}
</table>{{end}}
{{range .S.Targets}}{{if .ErrorSamples}}<p>Errors seen via {{.Name}}:</p><ul>{{range .ErrorSamples}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}{{end}}

<h2>Percentile plot</h2>
{{.SVG}}
<p><small>Files: <a href="percentiles.png">percentiles.png</a>, <a href="percentiles.svg">percentiles.svg</a>,
{{range .S.Targets}}<a href="{{.Hgrm}}">{{.Hgrm}}</a> (HdrHistogram percentile distribution), {{end}}<a href="summary.json">summary.json</a>.</small></p>
</body></html>
`))

func writeHTML(w io.Writer, s Summary, svg []byte) error {
	return page.Execute(w, struct {
		S   Summary
		SVG template.HTML
	}{s, template.HTML(inlineSVG(svg))}) // our own plot, written by gonum a moment ago
}

// inlineSVG drops the XML prolog and comments before the <svg> element, which have no place
// inside an HTML page.
func inlineSVG(svg []byte) []byte {
	if i := bytes.Index(svg, []byte("<svg")); i > 0 {
		return svg[i:]
	}
	return svg
}
