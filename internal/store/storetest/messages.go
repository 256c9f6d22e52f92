package storetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

var messageTests = []test{
	{"append numbers positions from 1", testMessagePositions},
	{"sessions number positions independently", testMessageSessions},
	{"a call naming two sessions is rejected whole", testMessageMixedBatch},
	{"append to an unknown session is not found", testMessageUnknownSession},
	{"messages keep every field", testMessageRoundTrip},
	{"list pages by position", testMessageList},
	{"recent returns the last n oldest first", testMessageRecent},
	{"values never alias the store", testMessageAliasing},
}

// newMessage returns a user message of session sessionID, not yet stored.
func newMessage(sessionID, content string) session.Message {
	return session.Message{
		ID: newID(), SessionID: sessionID, RunID: newID(),
		Role: session.RoleUser, Content: content, CreatedAt: at(0),
	}
}

// mustAppendMessages appends n user messages to session sessionID and
// returns them with the positions the store should have given them.
func mustAppendMessages(tb testing.TB, st kernel.Store, sessionID string, n int) []session.Message {
	tb.Helper()
	before := mustListMessages(tb, st, sessionID, 0, 0)
	msgs := make([]session.Message, n)
	for i := range msgs {
		msgs[i] = newMessage(sessionID, fmt.Sprintf("message %d", len(before)+i+1))
	}
	require.NoError(tb, appendMessages(tb.Context(), st, msgs...), "append messages")
	for i := range msgs {
		msgs[i].Position = int64(len(before) + i + 1)
	}
	return msgs
}

// mustListMessages returns ListMessages(sessionID, after, limit).
func mustListMessages(tb testing.TB, st kernel.Store, sessionID string, after int64, limit int) []session.Message {
	tb.Helper()
	msgs, err := st.ListMessages(tb.Context(), sessionID, after, limit)
	require.NoError(tb, err, "list messages")
	return msgs
}

// positions returns the positions of msgs in order.
func positions(msgs []session.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Position
	}
	return out
}

func testMessagePositions(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	want := mustAppendMessages(t, st, s.ID, 3)
	want = append(want, mustAppendMessages(t, st, s.ID, 2)...)
	got := mustListMessages(t, st, s.ID, 0, 0)
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, positions(got))
	assert.Equal(t, normAll(want, normMessage), normAll(got, normMessage))
}

func testMessageSessions(t *testing.T, st kernel.Store) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	mustAppendMessages(t, st, a.ID, 2)
	mustAppendMessages(t, st, b.ID, 1)
	// Each session continues its own count.
	require.NoError(t, appendMessages(t.Context(), st, newMessage(b.ID, "b2"), newMessage(b.ID, "b3")))
	require.NoError(t, appendMessages(t.Context(), st, newMessage(a.ID, "a3")))

	gotA, gotB := mustListMessages(t, st, a.ID, 0, 0), mustListMessages(t, st, b.ID, 0, 0)
	assert.Equal(t, []int64{1, 2, 3}, positions(gotA))
	assert.Equal(t, []int64{1, 2, 3}, positions(gotB))
	assert.Equal(t, "a3", gotA[2].Content)
	assert.Equal(t, []string{"b2", "b3"}, []string{gotB[1].Content, gotB[2].Content})
}

func testMessageMixedBatch(t *testing.T, st kernel.Store) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	mustToken(t, st, b.ID) // both sessions' leases are held
	mixed := []session.Message{newMessage(a.ID, "a1"), newMessage(b.ID, "b1"), newMessage(a.ID, "a2")}
	requireErr(t, appendMessages(t.Context(), st, mixed...), errdefs.ErrInvalid, "mixed_sessions")
	assert.Equal(t, []int64{0, 0, 0}, positions(mixed), "positions of a rejected call")
	assert.Empty(t, mustListMessages(t, st, a.ID, 0, 0))
	assert.Empty(t, mustListMessages(t, st, b.ID, 0, 0))
}

func testMessageUnknownSession(t *testing.T, st kernel.Store) {
	ctx, id := t.Context(), newID()
	requireNotFound(t, st.AppendMessages(ctx, 1, newMessage(id, "hi")), "session_not_found")
	_, err := st.ListMessages(ctx, id, 0, 0)
	requireNotFound(t, err, "session_not_found")
	_, err = st.RecentMessages(ctx, id, 10)
	requireNotFound(t, err, "session_not_found")
}

func testMessageRoundTrip(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	runID := newID()
	want := []session.Message{
		{ID: newID(), SessionID: s.ID, RunID: runID, Role: session.RoleSystem, Content: "be brief", CreatedAt: at(1)},
		{ID: newID(), SessionID: s.ID, RunID: runID, Role: session.RoleAssistant, Content: "let me check ☀",
			ToolCalls: []session.ToolCall{
				{ID: "call_1", Name: "current_time", Arguments: `{}`},
				{ID: "call_2", Name: "memory_get", Arguments: `{"key":"a/b"}`},
			}, CreatedAt: at(2)},
		{ID: newID(), SessionID: s.ID, RunID: runID, Role: session.RoleTool, Content: "no such key",
			ToolCallID: "call_2", IsError: true, CreatedAt: at(3)},
		{ID: newID(), SessionID: s.ID, RunID: runID, Role: session.RoleCompaction, Content: "they talked",
			Compaction: &session.Compaction{FirstKept: 2, TokensBefore: 900, TokensAfter: 120, Messages: 1, Model: "small"},
			CreatedAt:  at(4)},
		{ID: newID(), SessionID: s.ID, RunID: newID(), Role: session.RoleCompaction,
			Compaction: &session.Compaction{FirstKept: 6, TokensBefore: 150, Messages: 4, Cleared: true}, CreatedAt: at(5)},
	}
	require.NoError(t, appendMessages(t.Context(), st, want...))
	for i := range want {
		want[i].Position = int64(i + 1)
	}
	assert.Equal(t, normAll(want, normMessage), normAll(mustListMessages(t, st, s.ID, 0, 0), normMessage))
}

func testMessageList(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	mustAppendMessages(t, st, s.ID, 5)
	tests := []struct {
		name  string
		after int64
		limit int
		want  []int64
	}{
		{"all", 0, 0, []int64{1, 2, 3, 4, 5}},
		{"after", 2, 0, []int64{3, 4, 5}},
		{"after and limit", 2, 2, []int64{3, 4}},
		{"limit from the start", 0, 1, []int64{1}},
		{"limit above count", 3, 50, []int64{4, 5}},
		{"largest limit", 1, math.MaxInt, []int64{2, 3, 4, 5}},
		{"after the last", 5, 0, []int64{}},
		{"after beyond the last", 9, 0, []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, positions(mustListMessages(t, st, s.ID, tt.after, tt.limit)))
		})
	}
}

func testMessageRecent(t *testing.T, st kernel.Store) {
	s, empty := mustCreateSession(t, st), mustCreateSession(t, st)
	want := mustAppendMessages(t, st, s.ID, 5)
	tests := []struct {
		name string
		n    int
		want []session.Message
	}{
		{"fewer than stored", 2, want[3:]},
		{"exactly as many", 5, want},
		{"more than stored", 10, want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.RecentMessages(t.Context(), s.ID, tt.n)
			require.NoError(t, err)
			assert.Equal(t, normAll(tt.want, normMessage), normAll(got, normMessage))
		})
	}
	got, err := st.RecentMessages(t.Context(), empty.ID, 10)
	require.NoError(t, err)
	assert.Empty(t, got, "recent messages of an empty history")
}

func testMessageAliasing(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	m := newMessage(s.ID, "calling")
	m.Role, m.ToolCalls = session.RoleAssistant, []session.ToolCall{{ID: "c1", Name: "current_time", Arguments: "{}"}}
	require.NoError(t, appendMessages(ctx, st, m))
	m.ToolCalls[0].Name = "changed after append"

	listed := mustListMessages(t, st, s.ID, 0, 0)
	listed[0].ToolCalls[0].Name = "changed after list"
	recent, err := st.RecentMessages(ctx, s.ID, 1)
	require.NoError(t, err)
	recent[0].ToolCalls[0].Name = "changed after recent"
	assert.Equal(t, "current_time", mustListMessages(t, st, s.ID, 0, 0)[0].ToolCalls[0].Name)
}
