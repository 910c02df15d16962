package weighstation

import (
	"time"

	"go.k6.io/k6/js/modules"
	"go.k6.io/k6/metrics"
)

// opMetrics are the extension's k6 metrics. Durations are of completed, accepted operations
// only; refusals (the gateway's limit answers) and other failures are counted apart, so a
// threshold on duration is never flattered by fast rejections.
type opMetrics struct {
	duration *metrics.Metric // trend, tagged op=nats_publish|nats_request|kafka_produce
	ok       *metrics.Metric // rate of accepted operations
	refused  *metrics.Metric
	failed   *metrics.Metric
}

func registerMetrics(vu modules.VU) *opMetrics {
	r := vu.InitEnv().Registry
	return &opMetrics{
		duration: r.MustNewMetric("weighstation_duration", metrics.Trend, metrics.Time),
		ok:       r.MustNewMetric("weighstation_ok", metrics.Rate),
		refused:  r.MustNewMetric("weighstation_refused", metrics.Counter),
		failed:   r.MustNewMetric("weighstation_failed", metrics.Counter),
	}
}

// Result is what every operation returns to the script.
type Result struct {
	OK      bool   `js:"ok"`
	Refused bool   `js:"refused"`
	Error   string `js:"error"`
}

// record emits the samples of one operation that started at start.
func (m *instance) record(op string, start time.Time, refused bool, err error) Result {
	state := m.vu.State()
	end := time.Now()
	if state == nil { // the init context has no VU to report for
		return Result{OK: err == nil, Refused: err != nil && refused, Error: errText(err)}
	}
	tags := state.Tags.GetCurrentValues().Tags.With("op", op)
	sample := func(metric *metrics.Metric, v float64) metrics.Sample {
		return metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: metric, Tags: tags}, Time: end, Value: v}
	}
	res := Result{OK: err == nil, Refused: err != nil && refused, Error: errText(err)}
	samples := metrics.Samples{}
	switch {
	case err == nil:
		samples = append(samples, sample(m.metrics.duration, metrics.D(end.Sub(start))), sample(m.metrics.ok, 1))
	case refused:
		samples = append(samples, sample(m.metrics.refused, 1), sample(m.metrics.ok, 0))
	default:
		samples = append(samples, sample(m.metrics.failed, 1), sample(m.metrics.ok, 0))
	}
	metrics.PushIfNotDone(m.vu.Context(), state.Samples, samples)
	return res
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
