package storetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

var memoryTests = []test{
	{"put and get keep every field", testMemoryRoundTrip},
	{"put replaces an entry", testMemoryReplace},
	{"unknown key or session is not found", testMemoryNotFound},
	{"delete removes an entry", testMemoryDelete},
	{"list is sorted by key", testMemoryList},
	{"max entries limits new keys only", testMemoryLimit},
	{"sessions have separate memories", testMemorySessions},
	{"values never alias the store", testMemoryAliasing},
}

// noLimit is a maxEntries no test reaches.
const noLimit = 1000

// newEntry returns a memory entry of session sessionID, not yet stored.
func newEntry(sessionID, key, value string) session.MemoryEntry {
	return session.MemoryEntry{SessionID: sessionID, Key: key, Value: []byte(value), UpdatedAt: at(0)}
}

// mustPutMemory stores the entry key = value in session sessionID.
func mustPutMemory(tb testing.TB, st kernel.Store, sessionID, key, value string) {
	tb.Helper()
	require.NoError(tb, st.PutMemory(tb.Context(), newEntry(sessionID, key, value), noLimit), "put memory %q", key)
}

// mustGetMemory returns the stored entry key of session sessionID.
func mustGetMemory(tb testing.TB, st kernel.Store, sessionID, key string) session.MemoryEntry {
	tb.Helper()
	e, err := st.GetMemory(tb.Context(), sessionID, key)
	require.NoError(tb, err, "get memory %q", key)
	return e
}

// mustListMemory returns a session's entries.
func mustListMemory(tb testing.TB, st kernel.Store, sessionID string) []session.MemoryEntry {
	tb.Helper()
	es, err := st.ListMemory(tb.Context(), sessionID)
	require.NoError(tb, err, "list memory")
	return es
}

// keys returns the keys of es in order.
func keys(es []session.MemoryEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

func testMemoryRoundTrip(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	want := newEntry(s.ID, "prefs/user.name-1_x", `{"name":"Zoë","tags":["a","b"],"n":1.5}`)
	want.UpdatedAt = at(7)
	require.NoError(t, st.PutMemory(t.Context(), want, noLimit))
	assert.Equal(t, normEntry(want), normEntry(mustGetMemory(t, st, s.ID, want.Key)))
}

func testMemoryReplace(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	mustPutMemory(t, st, s.ID, "k", `1`)
	want := newEntry(s.ID, "k", `"two"`)
	want.UpdatedAt = at(9)
	require.NoError(t, st.PutMemory(t.Context(), want, noLimit))
	assert.Equal(t, normEntry(want), normEntry(mustGetMemory(t, st, s.ID, "k")))
	assert.Equal(t, []string{"k"}, keys(mustListMemory(t, st, s.ID)))
}

func testMemoryNotFound(t *testing.T, st kernel.Store) {
	ctx, unknown := t.Context(), newID()
	s := mustCreateSession(t, st)
	_, err := st.GetMemory(ctx, s.ID, "missing")
	requireNotFound(t, err, "memory_key_not_found")
	requireNotFound(t, st.DeleteMemory(ctx, s.ID, "missing"), "memory_key_not_found")
	_, err = st.GetMemory(ctx, unknown, "k")
	requireNotFound(t, err, "session_not_found")
	requireNotFound(t, st.PutMemory(ctx, newEntry(unknown, "k", `1`), noLimit), "session_not_found")
	requireNotFound(t, st.DeleteMemory(ctx, unknown, "k"), "session_not_found")
	_, err = st.ListMemory(ctx, unknown)
	requireNotFound(t, err, "session_not_found")
}

func testMemoryDelete(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	mustPutMemory(t, st, s.ID, "a", `1`)
	mustPutMemory(t, st, s.ID, "b", `2`)
	require.NoError(t, st.DeleteMemory(ctx, s.ID, "a"))
	_, err := st.GetMemory(ctx, s.ID, "a")
	requireNotFound(t, err, "memory_key_not_found")
	requireNotFound(t, st.DeleteMemory(ctx, s.ID, "a"), "memory_key_not_found")
	assert.Equal(t, []string{"b"}, keys(mustListMemory(t, st, s.ID)))
}

func testMemoryList(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	assert.Empty(t, mustListMemory(t, st, s.ID), "a new session's memory")
	for _, k := range []string{"b", "a/z", "B", "a", "a.b", "_x"} {
		mustPutMemory(t, st, s.ID, k, `"`+k+`"`)
	}
	got := mustListMemory(t, st, s.ID)
	// Byte order: upper case before lower case, '.' and '/' before letters.
	assert.Equal(t, []string{"B", "_x", "a", "a.b", "a/z", "b"}, keys(got))
	for _, e := range got {
		assert.JSONEq(t, `"`+e.Key+`"`, string(e.Value), "value of %q", e.Key)
		assert.Equal(t, s.ID, e.SessionID)
	}
}

func testMemoryLimit(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	const limit = 2
	require.NoError(t, st.PutMemory(ctx, newEntry(s.ID, "a", `1`), limit))
	require.NoError(t, st.PutMemory(ctx, newEntry(s.ID, "b", `2`), limit))

	err := st.PutMemory(ctx, newEntry(s.ID, "c", `3`), limit)
	requireErr(t, err, errdefs.ErrExhausted, "memory_full")
	_, err = st.GetMemory(ctx, s.ID, "c")
	requireNotFound(t, err, "memory_key_not_found")

	require.NoError(t, st.PutMemory(ctx, newEntry(s.ID, "a", `10`), limit), "replace at the limit")
	assert.JSONEq(t, `10`, string(mustGetMemory(t, st, s.ID, "a").Value))

	require.NoError(t, st.DeleteMemory(ctx, s.ID, "b"))
	require.NoError(t, st.PutMemory(ctx, newEntry(s.ID, "c", `3`), limit), "create after a delete")
	assert.Equal(t, []string{"a", "c"}, keys(mustListMemory(t, st, s.ID)))
}

func testMemorySessions(t *testing.T, st kernel.Store) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	mustPutMemory(t, st, a.ID, "k", `"a"`)
	mustPutMemory(t, st, b.ID, "k", `"b"`)
	mustPutMemory(t, st, b.ID, "only-b", `1`)
	assert.JSONEq(t, `"a"`, string(mustGetMemory(t, st, a.ID, "k").Value))
	assert.JSONEq(t, `"b"`, string(mustGetMemory(t, st, b.ID, "k").Value))
	assert.Equal(t, []string{"k"}, keys(mustListMemory(t, st, a.ID)))

	// The limit counts the session's own entries only.
	require.NoError(t, st.PutMemory(t.Context(), newEntry(a.ID, "second", `2`), 2))
}

func testMemoryAliasing(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	e := newEntry(s.ID, "k", `"orig"`)
	require.NoError(t, st.PutMemory(t.Context(), e, noLimit))
	copy(e.Value, `"XXXX"`)

	got := mustGetMemory(t, st, s.ID, "k")
	copy(got.Value, `"YYYY"`)
	listed := mustListMemory(t, st, s.ID)
	copy(listed[0].Value, `"ZZZZ"`)
	assert.Equal(t, `"orig"`, string(mustGetMemory(t, st, s.ID, "k").Value))
}
