// Package metrics exposes kerneld's Prometheus metrics: runs by outcome,
// events appended, open streams, provider and store latency. It observes
// the kernel from outside (as an Observer and through wrappers around the
// store and the model providers) so the kernel itself stays free of it.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// Metrics holds kerneld's collectors in a private registry.
type Metrics struct {
	reg             *prometheus.Registry
	events          *prometheus.CounterVec
	runsStarted     prometheus.Counter
	runsEnded       *prometheus.CounterVec
	runsResumed     *prometheus.CounterVec
	sessionsCreated prometheus.Counter
	sessionsDeleted prometheus.Counter
	storeLatency    *prometheus.HistogramVec
	providerCall    *prometheus.HistogramVec
	providerFirst   *prometheus.HistogramVec
}

// New returns metrics registered with a fresh registry, with the Go and
// process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kerneld_events_appended_total", Help: "Events appended to session logs, by AG-UI type.",
		}, []string{"type"}),
		runsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kerneld_runs_started_total", Help: "Runs started.",
		}),
		runsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kerneld_runs_ended_total", Help: "Runs ended, by outcome (success, cancelled, or the RUN_ERROR code).",
		}, []string{"outcome"}),
		runsResumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kerneld_runs_resumed_total",
			Help: "Runs continued here after the process running them stopped, by reason (crash, takeover, shutdown, store_outage).",
		}, []string{"reason"}),
		sessionsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kerneld_sessions_created_total", Help: "Sessions created.",
		}),
		sessionsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kerneld_sessions_deleted_total", Help: "Sessions deleted.",
		}),
		storeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kerneld_store_seconds", Help: "Latency of store operations.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
		providerCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kerneld_provider_call_seconds", Help: "Duration of model calls, by provider and result.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}, []string{"provider", "result"}),
		providerFirst: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kerneld_provider_first_chunk_seconds", Help: "Time from a model call to its first streamed chunk.",
			Buckets: prometheus.ExponentialBuckets(0.025, 2, 12),
		}, []string{"provider"}),
	}
	m.reg.MustRegister(m.events, m.runsStarted, m.runsEnded, m.runsResumed, m.sessionsCreated, m.sessionsDeleted,
		m.storeLatency, m.providerCall, m.providerFirst,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// GaugeFunc registers a gauge whose value is read at scrape time, e.g.
// the number of open streams.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// CounterFunc registers a counter whose value is read at scrape time,
// e.g. the connections refused so far.
func (m *Metrics) CounterFunc(name, help string, f func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}

// ObserveEvents implements kernel.Observer. It counts events and run
// starts, ends and resumes; how many runs are active is the kernel's to
// say (see kernel.Stats): counted from events it would drift on every
// restart. A continued run logs one RUN_STARTED and one end, wherever it
// ran, so summed over the replicas it counts once in each.
func (m *Metrics) ObserveEvents(evs []session.Event) {
	for i := range evs {
		ev := &evs[i]
		m.events.WithLabelValues(string(ev.Type)).Inc()
		switch ev.Type {
		case session.EventRunStarted:
			m.runsStarted.Inc()
		case session.EventRunFinished:
			outcome, _ := ev.Fields()["outcome"].(map[string]any)["type"].(string)
			m.runsEnded.WithLabelValues(outcome).Inc()
		case session.EventRunError:
			m.runsEnded.WithLabelValues(ev.Member("code")).Inc()
		case session.EventCustom:
			if ev.Member("name") == session.CustomRunResumed {
				reason, _ := ev.Fields()["value"].(map[string]any)["reason"].(string)
				m.runsResumed.WithLabelValues(reason).Inc()
			}
		}
	}
}

// ObserveSessionEnded implements kernel.Observer.
func (m *Metrics) ObserveSessionEnded(string, int64) {}

// Store wraps s so that session creates and deletes are counted and event
// appends and reads are timed.
func (m *Metrics) Store(s kernel.Store) kernel.Store { return &timedStore{Store: s, m: m} }

type timedStore struct {
	kernel.Store
	m *Metrics
}

func (s *timedStore) CreateSession(ctx context.Context, sess session.Session) error {
	err := s.Store.CreateSession(ctx, sess)
	if err == nil {
		s.m.sessionsCreated.Inc()
	}
	return err
}

func (s *timedStore) DeleteSession(ctx context.Context, id string) error {
	err := s.Store.DeleteSession(ctx, id)
	if err == nil {
		s.m.sessionsDeleted.Inc()
	}
	return err
}

func (s *timedStore) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	defer s.m.since("append_events", time.Now())
	return s.Store.AppendEvents(ctx, token, evs)
}

func (s *timedStore) ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error) {
	defer s.m.since("read_events", time.Now())
	return s.Store.ReadEvents(ctx, sessionID, after, limit)
}

func (m *Metrics) since(op string, start time.Time) {
	m.storeLatency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// Provider wraps a provider factory so that every model call it builds is
// timed: to its first chunk, and to its end.
func (m *Metrics) Provider(name string, f llm.Factory) llm.Factory {
	return func(cfg llm.ModelConfig) (llm.Provider, error) {
		p, err := f(cfg)
		if err != nil {
			return nil, err
		}
		return &timedProvider{Provider: p, name: name, m: m}, nil
	}
}

type timedProvider struct {
	llm.Provider
	name string
	m    *Metrics
}

func (p *timedProvider) Stream(ctx context.Context, req llm.Request, emit func(llm.Chunk) error) error {
	start, first := time.Now(), true
	err := p.Provider.Stream(ctx, req, func(c llm.Chunk) error {
		if first {
			first = false
			p.m.providerFirst.WithLabelValues(p.name).Observe(time.Since(start).Seconds())
		}
		return emit(c)
	})
	result := "ok"
	if err != nil {
		result = "error"
	}
	p.m.providerCall.WithLabelValues(p.name, result).Observe(time.Since(start).Seconds())
	return err
}
