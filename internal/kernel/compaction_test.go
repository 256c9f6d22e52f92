package kernel_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// compacting echoes its input and compacts past four messages, keeping
// two; its summaries come from the scripted model's summary option.
const compacting = `
name: compacting
model: {provider: recorded, script: [{text: "re: {input}"}], summary: "Earlier: {input}"}
memory: {compaction: {at_messages: 4, keep_last: 2}}
`

// recordedProvider registers the scripted model as the provider
// "recorded", whose requests p keeps.
func recordedProvider(p *recordingProvider) map[string]llm.Factory {
	return map[string]llm.Factory{"recorded": func(cfg llm.ModelConfig) (llm.Provider, error) {
		inner, err := scripted.New(cfg)
		p.inner = inner
		return p, err
	}}
}

// newCompactingKernel returns a kernel with agent defs on store (nil: a
// memory store), whose "recorded" model requests p keeps.
func newCompactingKernel(t *testing.T, p *recordingProvider, store kernel.Store, defs ...string) (*kerneltest.Kernel, *recorder) {
	t.Helper()
	return newKernel(t, kerneltest.Options{Agents: defs, Providers: recordedProvider(p), Store: store})
}

// contents lists what each message says, by role.
func contents(msgs []llm.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ": " + m.Content
	}
	return out
}

// customNames lists the kerneld.compaction.* events of evs.
func compactionEvents(t *testing.T, evs []session.Event) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		f := ev.Fields()
		if ev.Type == session.EventCustom && strings.HasPrefix(f["name"].(string), "kerneld.compaction.") {
			v, _ := f["value"].(map[string]any)
			out = append(out, map[string]any{"name": f["name"], "value": v})
		}
	}
	return out
}

// TestCompaction_Threshold: the run whose first model call would see more
// than at_messages compacts first: the model writes a summary of what
// goes, and sees the summary and the kept tail from then on, in this run
// and the next; /messages still lists everything, with the entry where
// it was made.
func TestCompaction_Threshold(t *testing.T) {
	p := &recordingProvider{}
	k, rec := newCompactingKernel(t, p, nil, compacting)
	s := mustSession(t, k.Kernel, "compacting")
	runToEnd(t, k.Kernel, rec, s.ID, "one")
	runToEnd(t, k.Kernel, rec, s.ID, "two")
	require.Len(t, p.Requests(), 2, "four messages and the next input: no compaction yet")

	third := runToEnd(t, k.Kernel, rec, s.ID, "three")
	assert.Equal(t, session.RunSucceeded, third.State)
	reqs := p.Requests()
	require.Len(t, reqs, 4, "a summary request, then the run's call")
	summary := reqs[2]
	assert.Equal(t, llm.PurposeSummary, summary.Purpose)
	require.Len(t, summary.Messages, 1)
	assert.Equal(t, "Summarise this conversation:\n\n[user] one\n[assistant] re: one", summary.Messages[0].Content)
	assert.Equal(t, []string{
		"user: Summary of the earlier conversation, which is no longer shown:\n\nEarlier: three",
		"user: two", "assistant: re: two", "user: three",
	}, contents(reqs[3].Messages), "the model sees the summary and the kept tail, from the turn that holds it")

	evs := verifiedLog(t, k.Kernel, s.ID)
	events := compactionEvents(t, runEvents(evs, third.ID))
	require.Len(t, events, 2)
	assert.Equal(t, "kerneld.compaction.started", events[0]["name"])
	assert.Equal(t, "kerneld.compaction.finished", events[1]["name"])
	finished := events[1]["value"].(map[string]any)
	assert.EqualValues(t, 3, finished["firstKept"])
	assert.EqualValues(t, 2, finished["messages"])
	assert.EqualValues(t, 6, finished["position"])

	history := historyOf(t, k.Kernel, s.ID)
	assert.Equal(t, []session.Role{"user", "assistant", "user", "assistant", "user", "compaction", "assistant"}, roles(history),
		"/messages keeps every message, with the entry where it was made")
	entry := history[5]
	assert.Equal(t, "Earlier: three", entry.Content)
	require.NotNil(t, entry.Compaction)
	assert.Equal(t, int64(3), entry.Compaction.FirstKept)
	assert.Equal(t, 2, entry.Compaction.Messages)
	assert.Greater(t, entry.Compaction.TokensBefore, int64(0))
	assert.Equal(t, third.ID, entry.RunID)

	runToEnd(t, k.Kernel, rec, s.ID, "four")
	reqs = p.Requests()
	require.Len(t, reqs, 6, "the summary and five messages pass at_messages again")
	assert.Contains(t, reqs[4].Messages[0].Content, "Earlier: three", "the new summary covers the old one")
	assert.Equal(t, []string{
		"user: Summary of the earlier conversation, which is no longer shown:\n\nEarlier: four",
		"user: three", "assistant: re: three", "user: four",
	}, contents(reqs[5].Messages))
}

// TestCompaction_FailingSummary: a summary that fails leaves the history
// as it was; the run says so in the stream and goes on with the window.
func TestCompaction_FailingSummary(t *testing.T) {
	p := &recordingProvider{}
	k, rec := newCompactingKernel(t, p, nil, strings.Replace(compacting, `summary: "Earlier: {input}"`, `summary_error: "summariser down"`, 1))
	s := mustSession(t, k.Kernel, "compacting")
	runToEnd(t, k.Kernel, rec, s.ID, "one")
	runToEnd(t, k.Kernel, rec, s.ID, "two")
	third := runToEnd(t, k.Kernel, rec, s.ID, "three")
	assert.Equal(t, session.RunSucceeded, third.State)

	reqs := p.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, []string{"user: one", "assistant: re: one", "user: two", "assistant: re: two", "user: three"},
		contents(reqs[3].Messages), "the run goes on with the window")
	events := compactionEvents(t, runEvents(verifiedLog(t, k.Kernel, s.ID), third.ID))
	require.Len(t, events, 2)
	assert.Contains(t, events[1]["value"].(map[string]any)["error"], "summariser down")
	assert.NotContains(t, roles(historyOf(t, k.Kernel, s.ID)), session.RoleCompaction)
	got, err := k.GetSession(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Nil(t, got.Compaction)
}

// TestCompaction_OnDemand: Compact summarises now, in a run of its own,
// whatever the threshold; a busy session is refused.
func TestCompaction_OnDemand(t *testing.T) {
	p := &recordingProvider{}
	k, rec := newCompactingKernel(t, p, nil,
		strings.Replace(compacting, "at_messages: 4", "at_messages: 100", 1), kerneltest.Waiter)
	s := mustSession(t, k.Kernel, "compacting")
	runToEnd(t, k.Kernel, rec, s.ID, "one")
	runToEnd(t, k.Kernel, rec, s.ID, "two")

	run, entry, err := k.Compact(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, session.RunSucceeded, run.State)
	assert.Equal(t, session.RunKindCompaction, run.Kind)
	require.NotNil(t, entry)
	assert.Equal(t, int64(3), entry.Compaction.FirstKept)
	assert.Equal(t, 2, entry.Compaction.Messages)
	evs := verifiedLog(t, k.Kernel, s.ID)
	assert.Equal(t, []session.EventType{"RUN_STARTED", "CUSTOM", "CUSTOM", "RUN_FINISHED"}, types(runEvents(evs, run.ID)))

	runToEnd(t, k.Kernel, rec, s.ID, "three")
	reqs := p.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, []string{
		"user: Summary of the earlier conversation, which is no longer shown:\n\nEarlier:",
		"user: two", "assistant: re: two", "user: three",
	}, contents(reqs[3].Messages))

	busy := mustSession(t, k.Kernel, "waiter")
	mustRun(t, k.Kernel, busy.ID, "wait")
	<-k.Wait.Started()
	_, _, err = k.Compact(t.Context(), busy.ID)
	requireCode(t, err, errdefs.ErrConflict, "session_busy")
	k.Wait.Release()
}

// TestCompaction_SurvivesRestart: on SQLite, a compaction made before a
// restart still shapes what the model sees after it.
func TestCompaction_SurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kerneld.db")
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	p1 := &recordingProvider{}
	k1, rec1 := newCompactingKernel(t, p1, db, compacting)
	s := mustSession(t, k1.Kernel, "compacting")
	for _, in := range []string{"one", "two", "three"} {
		runToEnd(t, k1.Kernel, rec1, s.ID, in)
	}
	require.Len(t, p1.Requests(), 4, "the third run compacted")
	require.NoError(t, k1.Close(context.Background()))
	require.NoError(t, db.Close())

	db, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	p2 := &recordingProvider{}
	k2, rec2 := newCompactingKernel(t, p2, db, strings.Replace(compacting, "at_messages: 4", "at_messages: 100", 1))
	runToEnd(t, k2.Kernel, rec2, s.ID, "four")
	reqs := p2.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, []string{
		"user: Summary of the earlier conversation, which is no longer shown:\n\nEarlier: three",
		"user: two", "assistant: re: two", "user: three", "assistant: re: three", "user: four",
	}, contents(reqs[0].Messages))
	assert.Equal(t, []session.Role{"user", "assistant", "user", "assistant", "user", "compaction", "assistant", "user", "assistant"},
		roles(historyOf(t, k2.Kernel, s.ID)))
}
