package kernel_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools"
)

// titlingProvider answers turns with its inner model and title calls with
// title, once release is closed: a test holds the title back to see that
// the run does not wait for it.
type titlingProvider struct {
	inner   llm.Provider
	title   string
	release chan struct{}
	calls   atomic.Int32
	models  chan string // the model each title call asked for
}

func (p *titlingProvider) Stream(ctx context.Context, req llm.Request, emit func(llm.Chunk) error) error {
	if req.Purpose != llm.PurposeTitle {
		return p.inner.Stream(ctx, req, emit)
	}
	p.calls.Add(1)
	p.models <- req.Model
	select {
	case <-p.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return emit(llm.Chunk{Text: p.title})
}

// newTitlingKernel builds a kernel that titles sessions, with the given
// agents, and closes it when the test ends.
func newTitlingKernel(tb testing.TB, titles kernel.Titles, specs ...agents.Spec) (*kernel.Kernel, *recorder) {
	tb.Helper()
	reg := tools.NewRegistry(tools.Builtins()...)
	registry, err := agents.NewRegistry(agents.Options{KnownTool: reg.Has}, specs...)
	require.NoError(tb, err)
	rec := newRecorder()
	k, err := kernel.New(kernel.Config{Agents: registry, Tools: reg, Store: memory.New(), Observers: []kernel.Observer{rec}, Titles: titles})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		assert.NoError(tb, k.Close(ctx))
	})
	return k, rec
}

// titledEvents returns the value of every kerneld.session.titled in evs,
// with the run that logged it.
func titledEvents(tb testing.TB, evs []session.Event) []map[string]string {
	tb.Helper()
	var out []map[string]string
	for _, ev := range evs {
		if ev.Type != session.EventCustom || ev.Member("name") != session.CustomSessionTitled {
			continue
		}
		var body struct{ Value map[string]string }
		require.NoError(tb, json.Unmarshal(ev.Data, &body))
		body.Value["loggedBy"] = ev.RunID
		out = append(out, body.Value)
	}
	return out
}

func TestKernel_Titles(t *testing.T) {
	t.Run("a scripted agent takes the first words of the first input, once", func(t *testing.T) {
		model := recordingModel(t, step{Text: "Sure."})
		k, rec := newTitlingKernel(t, kernel.Titles{Enabled: true, Generate: true},
			agents.Spec{Name: "scripted", Model: llm.ModelConfig{Provider: "scripted"}, Provider: model})
		s := mustSession(t, k, "scripted")
		first := runToEnd(t, k, rec, s.ID, "  Plan a weekend trip to Paris in May, please")
		second := runToEnd(t, k, rec, s.ID, "And Rome?")

		got, err := k.GetSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, "Plan a weekend trip to Paris", got.Title)
		assert.Equal(t, session.TitleFromInput, got.TitleSource)
		titled := titledEvents(t, verifiedLog(t, k, s.ID))
		require.Len(t, titled, 1, "titled once, by the first run")
		assert.Equal(t, map[string]string{"runId": first.ID, "loggedBy": first.ID, "title": got.Title, "source": "input"}, titled[0])
		assert.NotEqual(t, second.ID, titled[0]["loggedBy"])
		assert.Len(t, model.Requests(), 2, "no model call for a title")
	})

	t.Run("a model's title never delays the run and is logged by the next run once late", func(t *testing.T) {
		model := &titlingProvider{inner: recordingModel(t, step{Text: "Sure."}), title: `"Paris in May."`,
			release: make(chan struct{}), models: make(chan string, 4)}
		k, rec := newTitlingKernel(t, kernel.Titles{Enabled: true, Generate: true},
			agents.Spec{Name: "real", Model: llm.ModelConfig{Provider: "openai", Name: "big"}, TitleModel: "small", Provider: model})
		s := mustSession(t, k, "real")
		first := runToEnd(t, k, rec, s.ID, "Plan a weekend trip to Paris in May")
		assert.Equal(t, session.RunSucceeded, first.State, "the run ended while its title call waited")
		assert.Equal(t, "small", <-model.models, "the agent's title_model")

		close(model.release)
		waitSession(t, k, s.ID, "titled", func(s session.Session) bool { return s.Title != "" })
		got, err := k.GetSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, "Paris in May", got.Title, "quotes and final punctuation trimmed")
		assert.Equal(t, session.TitleFromModel, got.TitleSource)
		assert.Empty(t, titledEvents(t, logOf(t, k, s.ID)), "nothing is logged between runs")

		second := runToEnd(t, k, rec, s.ID, "And Rome?")
		third := runToEnd(t, k, rec, s.ID, "And Oslo?")
		titled := titledEvents(t, verifiedLog(t, k, s.ID))
		require.Len(t, titled, 1)
		assert.Equal(t, second.ID, titled[0]["loggedBy"], "the next run logs it")
		assert.Equal(t, "model", titled[0]["source"])
		assert.NotEqual(t, third.ID, titled[0]["loggedBy"])
		assert.Equal(t, int32(1), model.calls.Load(), "one title call per session")
	})

	t.Run("a title ready before the run ends is logged by that run", func(t *testing.T) {
		release := make(chan struct{})
		close(release)
		model := &titlingProvider{inner: recordingModel(t,
			step{Text: "Checking.", ToolCalls: []scriptedCall{{Name: "current_time"}}}, step{Text: "Done."}),
			title: "Time check", release: release, models: make(chan string, 4)}
		k, rec := newTitlingKernel(t, kernel.Titles{Enabled: true, Generate: true},
			agents.Spec{Name: "real", Model: llm.ModelConfig{Provider: "openai", Name: "big"}, Provider: model, Tools: toolRefs("current_time")})
		s := mustSession(t, k, "real")
		run := mustRun(t, k, s.ID, "What time is it?")
		waitSession(t, k, s.ID, "titled", func(s session.Session) bool { return s.Title != "" })
		waitRun(t, k, rec, s.ID, run.ID)
		assert.Equal(t, "big", <-model.models, "the run's model without a title_model")
		titled := titledEvents(t, verifiedLog(t, k, s.ID))
		if len(titled) == 1 { // the run may have ended before the title was recorded
			assert.Equal(t, run.ID, titled[0]["loggedBy"])
		}
		got, err := k.GetSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, "Time check", got.Title)
		assert.Equal(t, len(titled) == 1, got.TitleLogged, "logged exactly when the record says so")
	})

	t.Run("a client's title, even empty, is kept", func(t *testing.T) {
		model := &titlingProvider{inner: recordingModel(t, step{Text: "Sure."}), release: make(chan struct{}), models: make(chan string, 4)}
		k, rec := newTitlingKernel(t, kernel.Titles{Enabled: true, Generate: true},
			agents.Spec{Name: "real", Model: llm.ModelConfig{Provider: "openai", Name: "big"}, Provider: model})
		named, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "real", Title: "Mine"})
		require.NoError(t, err)
		cleared := mustSession(t, k, "real")
		empty := ""
		_, err = k.UpdateSession(t.Context(), cleared.ID, kernel.SessionUpdate{Title: &empty})
		require.NoError(t, err)
		runToEnd(t, k, rec, named.ID, "hello")
		runToEnd(t, k, rec, cleared.ID, "hello")
		for id, want := range map[string]string{named.ID: "Mine", cleared.ID: ""} {
			got, err := k.GetSession(t.Context(), id)
			require.NoError(t, err)
			assert.Equal(t, want, got.Title)
			assert.Empty(t, titledEvents(t, logOf(t, k, id)))
		}
		assert.Zero(t, model.calls.Load())
		long := string(make([]byte, 300))
		_, err = k.UpdateSession(t.Context(), named.ID, kernel.SessionUpdate{Title: &long})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "title")
	})
}

// waitSession polls session id until cond holds, failing after
// waitTimeout.
func waitSession(tb testing.TB, k *kernel.Kernel, id, what string, cond func(session.Session) bool) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		s, err := k.GetSession(tb.Context(), id)
		return err == nil && cond(s)
	}, waitTimeout, 5*time.Millisecond, "session %s never %s", id, what)
}
