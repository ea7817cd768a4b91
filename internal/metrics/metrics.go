// Package metrics is nekro's Prometheus metrics: turns and runs by how
// they ended, their latencies, plugin method calls, the turn queue, warm
// sandboxes, and the model's errors and tokens. It is the one package
// that imports the Prometheus client; the runtime, the agent and the
// model client report through small observer interfaces of their own,
// which *Metrics implements, and the composition root (internal/app)
// connects them. Each Metrics has its own registry: nothing global.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics collects nekro's metrics. Its methods are safe for concurrent
// use, and do nothing on a nil *Metrics.
type Metrics struct {
	reg          *prometheus.Registry
	turns        *prometheus.CounterVec
	turnDuration prometheus.Histogram
	runs         *prometheus.CounterVec
	runDuration  prometheus.Histogram
	calls        *prometheus.CounterVec
	modelErrors  prometheus.Counter
	modelTokens  *prometheus.CounterVec
}

// New returns metrics on a registry of their own, with the Go runtime's
// and the process's standard collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nekro_turns_total",
			Help: "Turns finished, by outcome: done, failed, interrupted."}, []string{"outcome"}),
		turnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nekro_turn_duration_seconds",
			Help:    "How long a turn took, from claiming its messages to its end (model and sandbox time included).",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900}}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nekro_runs_total",
			Help: "Sandbox runs finished, by stop type (NORMAL, ERROR, TIMEOUT, AGENT, MANUAL, MULTIMODAL_AGENT)."}, []string{"stop_type"}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nekro_run_duration_seconds",
			Help:    "How long a sandbox run's code ran.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nekro_tool_calls_total",
			Help: "Plugin method calls made by sandbox code, by plugin, method and outcome (ok, error)."}, []string{"plugin", "method", "outcome"}),
		modelErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "nekro_model_errors_total",
			Help: "Model requests that failed after their retries."}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nekro_model_tokens_total",
			Help: "Tokens the model endpoint reported, by kind: prompt, completion."}, []string{"kind"}),
	}
	m.reg.MustRegister(m.turns, m.turnDuration, m.runs, m.runDuration, m.calls, m.modelErrors, m.modelTokens,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Present from the start, at zero, so a dashboard's rate() has a series.
	for _, o := range []string{"done", "failed", "interrupted"} {
		m.turns.WithLabelValues(o)
	}
	for _, k := range []string{"prompt", "completion"} {
		m.modelTokens.WithLabelValues(k)
	}
	return m
}

// TurnFinished counts a turn that ended with outcome after d.
func (m *Metrics) TurnFinished(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.turns.WithLabelValues(outcome).Inc()
	m.turnDuration.Observe(d.Seconds())
}

// RunFinished counts a sandbox run that ended with stopType after d.
func (m *Metrics) RunFinished(stopType string, d time.Duration) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(stopType).Inc()
	m.runDuration.Observe(d.Seconds())
}

// MethodCalled counts a plugin method call from sandbox code.
func (m *Metrics) MethodCalled(plugin, method string, failed bool) {
	if m == nil {
		return
	}
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	m.calls.WithLabelValues(plugin, method, outcome).Inc()
}

// ModelAnswered counts one model request: failed, or the tokens it used.
func (m *Metrics) ModelAnswered(failed bool, promptTokens, completionTokens int) {
	if m == nil {
		return
	}
	if failed {
		m.modelErrors.Inc()
	}
	m.modelTokens.WithLabelValues("prompt").Add(float64(max(promptTokens, 0)))
	m.modelTokens.WithLabelValues("completion").Add(float64(max(completionTokens, 0)))
}

// Gauge adds a gauge whose value f reports at each scrape (the turn
// queue's depth, the warm sandboxes). f must be quick and safe for
// concurrent use.
func (m *Metrics) Gauge(name, help string, f func() float64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
