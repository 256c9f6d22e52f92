package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// transferTests pin what kerneld export and import (internal/transfer)
// rely on to move a session between stores seq for seq: what is written
// through the ordinary methods reads back as it was given, versions,
// import marks and bytes included.
var transferTests = []test{
	{"a created session keeps its version and import mark", testTransferSession},
	{"event bytes come back verbatim", testTransferEventBytes},
	{"memory values come back verbatim", testTransferMemoryBytes},
	{"a created run keeps its version and every field", testTransferRun},
}

func testTransferSession(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := newSession(func(s *session.Session) {
		s.Version, s.State, s.UpdatedAt = 7, session.StateCompleted, at(30)
		s.Imported = &session.ImportMark{Dump: "dump-1"}
	})
	require.NoError(t, st.CreateSession(ctx, s))
	assert.Equal(t, normSession(s), normSession(mustGetSession(t, st, s.ID)))

	s.Imported = &session.ImportMark{Dump: "dump-1", Done: true}
	require.NoError(t, st.UpdateSession(ctx, s))
	got := mustGetSession(t, st, s.ID)
	assert.Equal(t, &session.ImportMark{Dump: "dump-1", Done: true}, got.Imported)
	assert.Equal(t, int64(8), got.Version)
}

// testTransferEventBytes appends payloads a store that re-encodes JSON
// would change: spaces between tokens, keys out of order, escapes and
// HTML characters. A dump carries them byte for byte, and so must stores.
func testTransferEventBytes(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	payloads := [][2]string{
		{`{"type":"STATE_SNAPSHOT", "snapshot": {"b": 1, "a": [1, 2]}}`, `{"reason": "cancelled"}`},
		{`{"type":"TEXT_MESSAGE_CONTENT","delta":"<b>&amp;</b> \u2028 \"q\" é"}`, ``},
		{`{"z":1,"type":"CUSTOM","a":0.10}`, `{"b":2,"a":1}`},
	}
	evs := make([]session.Event, len(payloads))
	for i, p := range payloads {
		evs[i] = session.Event{SessionID: s.ID, RunID: "r1", Type: session.EventCustom,
			Time: at(i).Add(123 * time.Microsecond), Data: []byte(p[0])}
		if p[1] != "" {
			evs[i].Meta = []byte(p[1])
		}
	}
	require.NoError(t, st.AppendEvents(t.Context(), mustToken(t, st, s.ID), evs))
	got, err := st.ReadEvents(t.Context(), s.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, got, len(payloads))
	for i, p := range payloads {
		assert.Equal(t, p[0], string(got[i].Data), "data of event %d", i+1)
		assert.Equal(t, p[1], string(got[i].Meta), "meta of event %d", i+1)
		assert.True(t, evs[i].Time.Equal(got[i].Time), "time of event %d: %v, want %v", i+1, got[i].Time, evs[i].Time)
	}
}

func testTransferMemoryBytes(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	value := `{"lang": "en",  "z": 1, "a": "<b>"}`
	require.NoError(t, st.PutMemory(t.Context(), session.MemoryEntry{SessionID: s.ID, Key: "prefs",
		Value: []byte(value), UpdatedAt: at(3)}, 0))
	got, err := st.GetMemory(t.Context(), s.ID, "prefs")
	require.NoError(t, err)
	assert.Equal(t, value, string(got.Value))
}

func testTransferRun(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	r := session.Run{ID: newID(), SessionID: s.ID, State: session.RunFailed, Input: "hi",
		IdempotencyKey: "k", CreatedAt: at(1), StartedAt: at(2), EndedAt: at(3),
		Error: &session.RunError{Code: "model_error", Message: "boom"}, Usage: session.Usage{InputTokens: 5, OutputTokens: 6},
		StartSeq: 1, EndSeq: 9, Version: 4, RunExt: session.RunExt{Model: "m", Resumes: 2, Source: "schedule"}}
	require.NoError(t, st.CreateRun(t.Context(), r, session.RunConstraints{}))
	got, err := st.GetRun(t.Context(), s.ID, r.ID)
	require.NoError(t, err)
	assert.Equal(t, normRun(r), normRun(got))
}
