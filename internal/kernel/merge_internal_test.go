package kernel

import (
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// describe renders events as TYPE(id:delta) or TYPE, for comparing batches.
func describe(evs []session.Event) string {
	var parts []string
	for _, ev := range evs {
		if id, delta, ok := ev.Delta(); ok {
			parts = append(parts, string(ev.Type)+"("+id+":"+delta+")")
			continue
		}
		parts = append(parts, string(ev.Type))
	}
	return strings.Join(parts, " ")
}

// inRun sets the run of evs.
func inRun(runID string, evs ...session.Event) []session.Event {
	for i := range evs {
		evs[i].RunID = runID
	}
	return evs
}

func TestDeltaMerger_Rule(t *testing.T) {
	text, args, reasoning := session.TextMessageContent, session.ToolCallArgs, session.ReasoningMessageContent
	withMeta := text("m", "x").WithMeta("isError", true)
	cases := []struct {
		name string
		evs  []session.Event
		want string
	}{
		{"consecutive deltas of one message", inRun("r", text("m", "a"), text("m", "b"), text("m", "c")),
			"TEXT_MESSAGE_CONTENT(m:abc)"},
		{"each kind of delta", inRun("r", args("c", `{"a"`), args("c", `:1}`), reasoning("m", "hm"), reasoning("m", "m")),
			`TOOL_CALL_ARGS(c:{"a":1}) REASONING_MESSAGE_CONTENT(m:hmm)`},
		{"never across messages", inRun("r", text("m1", "a"), text("m2", "b"), text("m1", "c")),
			"TEXT_MESSAGE_CONTENT(m1:a) TEXT_MESSAGE_CONTENT(m2:b) TEXT_MESSAGE_CONTENT(m1:c)"},
		{"never across kinds of one id", inRun("r", text("m", "a"), reasoning("m", "b")),
			"TEXT_MESSAGE_CONTENT(m:a) REASONING_MESSAGE_CONTENT(m:b)"},
		{"never across another event", inRun("r", text("m", "a"), session.TextMessageEnd("m"), text("m", "b")),
			"TEXT_MESSAGE_CONTENT(m:a) TEXT_MESSAGE_END TEXT_MESSAGE_CONTENT(m:b)"},
		{"never across a run's end", append(inRun("r1", text("m", "a"), session.RunFinished("s", "r1", session.OutcomeSuccess, "", session.Usage{})), inRun("r2", text("m", "b"))...),
			"TEXT_MESSAGE_CONTENT(m:a) RUN_FINISHED TEXT_MESSAGE_CONTENT(m:b)"},
		{"never across runs", append(inRun("r1", text("m", "a")), inRun("r2", text("m", "b"))...),
			"TEXT_MESSAGE_CONTENT(m:a) TEXT_MESSAGE_CONTENT(m:b)"},
		{"never an event with metadata", inRun("r", text("m", "a"), withMeta, text("m", "b")),
			"TEXT_MESSAGE_CONTENT(m:a) TEXT_MESSAGE_CONTENT TEXT_MESSAGE_CONTENT(m:b)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := deltaMerger{on: true}
			var pending []session.Event
			for _, ev := range tc.evs {
				pending = m.add(pending, ev)
			}
			if got := describe(m.finishBatch(pending)); got != tc.want {
				t.Errorf("batch = %s\nwant    %s", got, tc.want)
			}
		})
	}
}

// TestDeltaMerger_Bounds: a merged delta stops growing at maxMergedDelta,
// keeping every byte and their order, and a merger that is off merges
// nothing.
func TestDeltaMerger_Bounds(t *testing.T) {
	m := deltaMerger{on: true}
	var pending []session.Event
	piece := strings.Repeat("x", 1000) + "|"
	for range 40 {
		pending = m.add(pending, session.TextMessageContent("m", piece))
	}
	pending = m.finishBatch(pending)
	var all strings.Builder
	for _, ev := range pending {
		_, delta, _ := ev.Delta()
		if len(delta) > maxMergedDelta {
			t.Errorf("merged delta of %d bytes, over %d", len(delta), maxMergedDelta)
		}
		all.WriteString(delta)
	}
	if all.String() != strings.Repeat(piece, 40) || len(pending) < 3 {
		t.Errorf("%d events carrying %d bytes, want the 40 pieces in at least 3", len(pending), all.Len())
	}
	off := deltaMerger{}
	pending = nil
	for range 3 {
		pending = off.add(pending, session.TextMessageContent("m", "a"))
	}
	if len(off.finishBatch(pending)) != 3 {
		t.Error("a merger that is off merged")
	}
}

// TestEventWriter_MergesBehindCommit: deltas queued while an append is in
// flight reach the log, and the observers, as one event per message, with
// the same text; the next batch starts afresh.
func TestEventWriter_MergesBehindCommit(t *testing.T) {
	st := &gatedStore{Store: memory.New(), gate: make(chan struct{})}
	k, id, token := newWriterKernel(t, st)
	obs := &batchLog{}
	k.observers = append(k.observers, obs)
	w := testWriter(t, k, id, token)
	w.merger.on = true
	for _, d := range strings.Fields("a b c d e") {
		if err := w.write(session.TextMessageContent("m", d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.write(session.TextMessageEnd("m"), session.ToolCallArgs("c", "{"), session.ToolCallArgs("c", "}")); err != nil {
		t.Fatal(err)
	}
	close(st.gate)
	if _, err := w.flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	evs, _ := st.ReadEvents(t.Context(), id, 0, 0)
	var text strings.Builder
	for _, ev := range evs {
		if ev.Type == session.EventTextMessageContent {
			text.WriteString(ev.Member("delta"))
		}
	}
	if text.String() != "abcde" || len(evs) > 4 {
		t.Errorf("log = %s; want the text abcde in at most 2 events, then the end and one args event", describe(evs))
	}
	if got, want := describe(obs.evs), describe(evs); got != want {
		t.Errorf("observed %s\nlogged   %s", got, want)
	}
}

// batchLog is an observer that keeps what it is shown.
type batchLog struct{ evs []session.Event }

func (b *batchLog) ObserveEvents(evs []session.Event) { b.evs = append(b.evs, evs...) }
func (b *batchLog) ObserveSessionEnded(string, int64) {}
