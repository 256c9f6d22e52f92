package storetest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

var eventTests = []test{
	{"append numbers from 1 in the caller's slice", testEventSeq},
	{"sessions number independently", testEventSessions},
	{"last seq shows on the session", testEventLastSeq},
	{"update session does not move last seq", testEventUpdateKeepsLastSeq},
	{"events keep every field", testEventRoundTrip},
	{"read pages by seq", testEventRead},
	{"unknown session is not found", testEventUnknownSession},
	{"a batch naming two sessions is rejected whole", testEventMixedBatch},
	{"an empty batch appends nothing", testEventEmptyBatch},
	{"values never alias the store", testEventAliasing},
}

// newEvent returns a TEXT_MESSAGE_CONTENT event of session sessionID,
// not yet appended, whose delta and time are told apart by n.
func newEvent(sessionID, runID string, n int) session.Event {
	ev := session.TextMessageContent("msg-1", fmt.Sprintf("token %d ", n))
	ev.SessionID, ev.RunID, ev.Time = sessionID, runID, at(n)
	return ev
}

// newEvents returns n events of session sessionID, numbered from first.
func newEvents(sessionID string, first, n int) []session.Event {
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = newEvent(sessionID, "run-1", first+i)
	}
	return evs
}

// mustAppendEvents appends evs and returns them with their seqs.
func mustAppendEvents(tb testing.TB, st kernel.Store, evs []session.Event) []session.Event {
	tb.Helper()
	require.NoError(tb, appendEvents(tb.Context(), st, evs), "append events")
	return evs
}

// mustReadEvents returns ReadEvents(sessionID, after, limit).
func mustReadEvents(tb testing.TB, st kernel.Store, sessionID string, after int64, limit int) []session.Event {
	tb.Helper()
	evs, err := st.ReadEvents(tb.Context(), sessionID, after, limit)
	require.NoError(tb, err, "read events")
	return evs
}

// seqs returns the seqs of evs in order.
func seqs(evs []session.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

// span returns the seqs from..to inclusive.
func span(from, to int64) []int64 {
	out := []int64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func testEventSeq(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	first := mustAppendEvents(t, st, newEvents(s.ID, 0, 3))
	assert.Equal(t, span(1, 3), seqs(first), "seqs written into the caller's slice")
	second := mustAppendEvents(t, st, newEvents(s.ID, 3, 2))
	assert.Equal(t, span(4, 5), seqs(second))
	one := mustAppendEvents(t, st, newEvents(s.ID, 5, 1))
	assert.Equal(t, span(6, 6), seqs(one))
	assert.Equal(t, span(1, 6), seqs(mustReadEvents(t, st, s.ID, 0, 0)))
}

func testEventSessions(t *testing.T, st kernel.Store) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	mustAppendEvents(t, st, newEvents(a.ID, 0, 3))
	assert.Equal(t, span(1, 2), seqs(mustAppendEvents(t, st, newEvents(b.ID, 0, 2))))
	assert.Equal(t, span(4, 4), seqs(mustAppendEvents(t, st, newEvents(a.ID, 3, 1))))
	for _, ev := range mustReadEvents(t, st, b.ID, 0, 0) {
		assert.Equal(t, b.ID, ev.SessionID)
	}
}

func testEventLastSeq(t *testing.T, st kernel.Store) {
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	mustAppendEvents(t, st, newEvents(s.ID, 0, 4))
	mustAppendEvents(t, st, newEvents(s.ID, 4, 3))
	assert.EqualValues(t, 7, mustGetSession(t, st, s.ID).LastSeq)
	assert.Zero(t, mustGetSession(t, st, other.ID).LastSeq)

	listed, err := st.ListSessions(t.Context(), kernel.SessionQuery{})
	require.NoError(t, err)
	require.Equal(t, []string{other.ID, s.ID}, sessionIDs(listed))
	assert.EqualValues(t, 7, listed[1].LastSeq, "LastSeq in ListSessions")
}

func testEventUpdateKeepsLastSeq(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	mustAppendEvents(t, st, newEvents(s.ID, 0, 3))
	for _, stale := range []int64{0, 2, 99} {
		s.LastSeq, s.Name = stale, fmt.Sprintf("stale %d", stale)
		require.NoError(t, st.UpdateSession(ctx, s))
		s.Version++
		got := mustGetSession(t, st, s.ID)
		assert.EqualValues(t, 3, got.LastSeq, "after an update carrying LastSeq %d", stale)
		assert.Equal(t, s.Name, got.Name)
	}
	assert.Equal(t, span(4, 4), seqs(mustAppendEvents(t, st, newEvents(s.ID, 3, 1))))
}

func testEventRoundTrip(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	runID := newID()
	want := []session.Event{
		session.RunStarted(s.ID, runID),
		session.TextMessageContent("m1", "héllo \"wörld\"\n\u2028 <&> 😀"),
		session.ToolCallResult("m2", "call_1", "failed", true),
		session.Custom("kerneld.run.queued", map[string]any{"position": 2}),
		session.RunFinished(s.ID, runID, session.OutcomeCancelled, session.ReasonInterrupted, session.Usage{InputTokens: 3, OutputTokens: 4}),
	}
	for i := range want {
		want[i].SessionID, want[i].RunID, want[i].Time = s.ID, runID, at(i).Add(123*time.Microsecond)
	}
	want[3].RunID = "" // an event outside any run keeps its empty RunID
	mustAppendEvents(t, st, want)
	got := mustReadEvents(t, st, s.ID, 0, 0)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, normEvent(want[i]), normEvent(got[i]), "event %d", i)
		assert.Equal(t, string(want[i].Data), string(got[i].Data), "Data of event %d, byte for byte", i)
		assert.True(t, want[i].Time.Equal(got[i].Time), "Time of event %d = %v, want %v", i, got[i].Time, want[i].Time)
	}
}

func testEventRead(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	mustAppendEvents(t, st, newEvents(s.ID, 0, 10))
	tests := []struct {
		name  string
		after int64
		limit int
		want  []int64
	}{
		{"all", 0, 0, span(1, 10)},
		{"negative limit means all", 0, -1, span(1, 10)},
		{"after", 3, 0, span(4, 10)},
		{"after and limit", 3, 2, span(4, 5)},
		{"limit from the start", 0, 4, span(1, 4)},
		{"limit above count", 8, 50, span(9, 10)},
		{"largest limit", 3, math.MaxInt, span(4, 10)},
		{"after the last", 10, 0, span(1, 0)},
		{"after beyond the last", 20, 5, span(1, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustReadEvents(t, st, s.ID, tt.after, tt.limit)
			assert.Equal(t, tt.want, seqs(got))
			for _, ev := range got {
				assert.Equal(t, fmt.Sprintf("token %d ", ev.Seq-1), ev.Member("delta"), "delta of seq %d", ev.Seq)
			}
		})
	}
}

func testEventUnknownSession(t *testing.T, st kernel.Store) {
	ctx, id := t.Context(), newID()
	evs := newEvents(id, 0, 2)
	requireNotFound(t, st.AppendEvents(ctx, 1, evs), "session_not_found")
	assert.Equal(t, []int64{0, 0}, seqs(evs), "seqs of a failed append")
	_, err := st.ReadEvents(ctx, id, 0, 0)
	requireNotFound(t, err, "session_not_found")
}

func testEventMixedBatch(t *testing.T, st kernel.Store) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	evs := append(newEvents(a.ID, 0, 2), newEvent(b.ID, "run-1", 2))
	requireErr(t, appendEvents(t.Context(), st, evs), errdefs.ErrInvalid, "mixed_sessions")
	assert.Equal(t, []int64{0, 0, 0}, seqs(evs), "seqs of a rejected batch")
	assert.Empty(t, mustReadEvents(t, st, a.ID, 0, 0))
	assert.Empty(t, mustReadEvents(t, st, b.ID, 0, 0))
	assert.Zero(t, mustGetSession(t, st, a.ID).LastSeq)
}

func testEventEmptyBatch(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	token := mustToken(t, st, s.ID)
	require.NoError(t, st.AppendEvents(t.Context(), token, nil))
	require.NoError(t, st.AppendEvents(t.Context(), token, []session.Event{}))
	assert.Zero(t, mustGetSession(t, st, s.ID).LastSeq)
}

func testEventAliasing(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	// Callers reuse their buffers once the append returns.
	data := []byte(`{"type":"CUSTOM","name":"kerneld.test","value":"orig"}`)
	meta := []byte(`{"reason":"orig"}`)
	ev := session.Event{SessionID: s.ID, Type: session.EventCustom, Time: at(0), Data: data, Meta: meta}
	mustAppendEvents(t, st, []session.Event{ev})
	copy(data[len(data)-6:], `XXXX"}`)
	copy(meta[len(meta)-6:], `XXXX"}`)

	got := mustReadEvents(t, st, s.ID, 0, 0)
	copy(got[0].Data, `YYYY`)
	copy(got[0].Meta, `YYYY`)
	again := mustReadEvents(t, st, s.ID, 0, 0)
	assert.Equal(t, `{"type":"CUSTOM","name":"kerneld.test","value":"orig"}`, string(again[0].Data))
	assert.Equal(t, `{"reason":"orig"}`, string(again[0].Meta))
}
