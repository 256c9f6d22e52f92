package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/metrics"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	return string(b)
}

func TestMetrics(t *testing.T) {
	m := metrics.New()
	m.ObserveEvents([]session.Event{
		session.RunStarted("s", "r1"), session.TextMessageContent("m", "hi"),
		session.RunFinished("s", "r1", session.OutcomeSuccess, "", session.Usage{}),
		session.RunStarted("s", "r2"), session.RunErrored(session.ErrorCodeModel, "boom", session.Usage{}),
		session.RunStarted("s", "r3"),
		session.Custom("kerneld.run.queued", map[string]any{"runId": "r4", "position": 1}),
	})
	// r3 is continued by another process, which logs its resume and its
	// end, but never a second start.
	m.ObserveEvents([]session.Event{
		session.RunResumed("r3", 2, session.ResumeTakeover, nil, nil),
		session.RunFinished("s", "r3", session.OutcomeSuccess, "", session.Usage{}),
	})
	m.GaugeFunc("kerneld_streams_open", "Open streams.", func() float64 { return 7 })

	st := m.Store(memory.New())
	if err := st.CreateSession(t.Context(), session.Session{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	factory := m.Provider("fake", func(llm.ModelConfig) (llm.Provider, error) { return oneChunk{}, nil })
	p, _ := factory(llm.ModelConfig{})
	_ = p.Stream(t.Context(), llm.Request{}, func(llm.Chunk) error { return nil })

	out := scrape(t, m)
	for _, want := range []string{
		`kerneld_events_appended_total{type="TEXT_MESSAGE_CONTENT"} 1`,
		`kerneld_runs_started_total 3`,
		`kerneld_runs_ended_total{outcome="success"} 2`,
		`kerneld_runs_resumed_total{reason="takeover"} 1`,
		`kerneld_runs_ended_total{outcome="model_error"} 1`,
		`kerneld_sessions_created_total 1`,
		`kerneld_streams_open 7`,
		`kerneld_provider_call_seconds_count{provider="fake",result="ok"} 1`,
		`kerneld_provider_first_chunk_seconds_count{provider="fake"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

type oneChunk struct{}

func (oneChunk) Stream(_ context.Context, _ llm.Request, emit func(llm.Chunk) error) error {
	return emit(llm.Chunk{Text: "hi"})
}
