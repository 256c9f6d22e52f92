package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

var sessionTests = []test{
	{"create and get keep every field", testSessionRoundTrip},
	{"create with a taken id is a conflict", testSessionDuplicate},
	{"unknown session is not found", testSessionNotFound},
	{"update replaces the session", testSessionUpdate},
	{"extension fields survive create and update", testSessionExt},
	{"list filters by tenant agent state and parent", testSessionListFilters},
	{"list pages newest first", testSessionListPaging},
	{"list orders by creation time then id", testSessionListOrder},
	{"list pages through sessions created together", testSessionListTies},
	{"list filters by metadata", testSessionListMetadata},
	{"an update moves a session between metadata filters", testSessionListMetadataUpdate},
	{"list filters by creation time", testSessionListCreated},
	{"list combines filters across pages", testSessionListCombined},
	{"list filters by fork origin", testSessionListForkedFrom},
	{"list filters by expiry for retention", testSessionListExpiresBefore},
	{"list filters by last update for retention", testSessionListUpdatedBefore},
	{"list of an empty store is empty", testSessionListEmpty},
	{"values never alias the store", testSessionAliasing},
	{"count counts one tenant's sessions until they are deleted", testSessionCount},
}

// newSession returns a top-level session in tenant "acme" of agent
// "helper", not yet stored, with edits applied.
func newSession(edits ...func(*session.Session)) session.Session {
	id := newID()
	s := session.Session{
		ID: id, Tenant: "acme", Agent: "helper", Name: "first",
		Metadata: map[string]string{"team": "core"},
		State:    session.StateActive, RootID: id,
		CreatedAt: at(0), UpdatedAt: at(0),
	}
	for _, edit := range edits {
		edit(&s)
	}
	return s
}

// mustCreateSession stores newSession(edits...) and returns it.
func mustCreateSession(tb testing.TB, st kernel.Store, edits ...func(*session.Session)) session.Session {
	tb.Helper()
	s := newSession(edits...)
	require.NoError(tb, st.CreateSession(tb.Context(), s), "create session")
	return s
}

// mustGetSession returns the stored session id.
func mustGetSession(tb testing.TB, st kernel.Store, id string) session.Session {
	tb.Helper()
	s, err := st.GetSession(tb.Context(), id)
	require.NoError(tb, err, "get session %s", id)
	return s
}

// childOf returns an edit making a session a child of parent.
func childOf(parent session.Session) func(*session.Session) {
	return func(s *session.Session) {
		s.ParentID, s.RootID, s.Depth = parent.ID, parent.RootID, parent.Depth+1
	}
}

// sessionIDs returns the ids of ss in order.
func sessionIDs(ss []session.Session) []string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	return ids
}

func testSessionRoundTrip(t *testing.T, st kernel.Store) {
	parent := mustCreateSession(t, st)
	want := mustCreateSession(t, st, childOf(parent), func(s *session.Session) {
		s.Name, s.State, s.ActiveRunID = "child", session.StateRunning, newID()
		s.Metadata = map[string]string{"a": "1", "b": "two words"}
		s.CreatedAt, s.UpdatedAt, s.TTL, s.ExpiresAt = at(1), at(2), 90*time.Minute, at(3600)
		s.InheritMemory, s.ForkedFrom = "copy", parent.ID
	})
	got := mustGetSession(t, st, want.ID)
	assert.Equal(t, normSession(want), normSession(got))
	assert.Zero(t, got.LastSeq, "LastSeq of a new session")
	assert.Zero(t, got.Version, "Version of a new session")
}

// float and integer return pointers to their argument.
func float(f float64) *float64 { return &f }
func integer(n int) *int       { return &n }

func testSessionExt(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	origin := mustCreateSession(t, st)
	s := mustCreateSession(t, st, func(s *session.Session) {
		s.ForkedFrom = origin.ID
		s.SessionExt = session.SessionExt{
			ForkPosition: 12,
			ClosedReason: "done for today ✓",
			AgentState:   json.RawMessage(`{"todo": ["a", "b"], "n": 1.5, "nested": {"ok": true}}`),
			Overrides: &session.Overrides{Model: "small", ReasoningEffort: "low",
				Temperature: float(0), MaxTokens: integer(256)},
			Model:      "small",
			Compaction: &session.Compaction{Position: 9, Summary: "s", FirstKept: 5, TokensBefore: 90, TokensAfter: 9, Messages: 4},
			ClearedAt:  3, // a clear at 3, compacted since
			// Read cursors and replies give each reader its unread count.
			ReadCursors: map[string]int64{"key:0a1b": 7, "user:ff00": 12},
			Replies:     []int64{5, 9, 12},
		}
	})
	got := mustGetSession(t, st, s.ID)
	assert.Equal(t, normSession(s), normSession(got))
	require.NotNil(t, got.Overrides)
	require.NotNil(t, got.Overrides.Temperature, "a zero temperature is kept, not dropped")
	assert.JSONEq(t, string(s.AgentState), string(got.AgentState))

	// Update replaces the extension fields too.
	got.AgentState = json.RawMessage(`[1, "two", null]`)
	got.Overrides = &session.Overrides{MaxTokens: integer(10)}
	got.ClosedReason, got.ForkPosition = "", 0
	got.ReadCursors["key:0a1b"] = 12
	got.Replies = append(got.Replies, 20)
	require.NoError(t, st.UpdateSession(ctx, got))
	got.Version++
	assert.Equal(t, normSession(got), normSession(mustGetSession(t, st, s.ID)))

	got.AgentState, got.Overrides = nil, nil
	require.NoError(t, st.UpdateSession(ctx, got))
	got.Version++
	again := mustGetSession(t, st, s.ID)
	assert.Equal(t, normSession(got), normSession(again))
	assert.Nil(t, again.Overrides)
	assert.Empty(t, again.AgentState)
}

func testSessionDuplicate(t *testing.T, st kernel.Store) {
	orig := mustCreateSession(t, st)
	dup := newSession(func(s *session.Session) { s.ID, s.Agent = orig.ID, "other" })
	requireErr(t, st.CreateSession(t.Context(), dup), errdefs.ErrConflict, "")
	got := mustGetSession(t, st, orig.ID)
	assert.Equal(t, "helper", got.Agent, "the original survives a conflicting create")
}

func testSessionNotFound(t *testing.T, st kernel.Store) {
	ctx, id := t.Context(), newID()
	_, err := st.GetSession(ctx, id)
	requireNotFound(t, err, "session_not_found")
	requireNotFound(t, st.UpdateSession(ctx, newSession(func(s *session.Session) { s.ID = id })), "session_not_found")
	requireNotFound(t, st.DeleteSession(ctx, id), "session_not_found")
}

func testSessionUpdate(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	s.Name, s.State, s.ActiveRunID = "renamed", session.StateRunning, newID()
	s.Metadata = map[string]string{"other": "x"}
	s.UpdatedAt, s.TTL, s.ExpiresAt, s.InheritMemory = at(5), time.Hour, at(100), "none"
	s.ForkedFrom = newID()
	require.NoError(t, st.UpdateSession(t.Context(), s))
	s.Version++
	assert.Equal(t, normSession(s), normSession(mustGetSession(t, st, s.ID)))

	// Replace, not merge: emptied fields come back empty.
	s.Name, s.Metadata, s.ActiveRunID, s.TTL, s.ExpiresAt = "", nil, "", 0, time.Time{}
	s.ForkedFrom = ""
	require.NoError(t, st.UpdateSession(t.Context(), s))
	s.Version++
	assert.Equal(t, normSession(s), normSession(mustGetSession(t, st, s.ID)))
}

func testSessionListFilters(t *testing.T, st kernel.Store) {
	parent := mustCreateSession(t, st)
	s2 := mustCreateSession(t, st, func(s *session.Session) { s.Agent, s.State = "coder", session.StateRunning })
	s3 := mustCreateSession(t, st, func(s *session.Session) { s.Tenant, s.State = "other", session.StateCompleted })
	c1 := mustCreateSession(t, st, childOf(parent), func(s *session.Session) { s.State = session.StateRunning })
	c2 := mustCreateSession(t, st, childOf(parent), func(s *session.Session) { s.Agent, s.State = "coder", session.StateClosed })

	tests := []listing{
		{"no filter", kernel.SessionQuery{}, []session.Session{c2, c1, s3, s2, parent}},
		{"tenant", kernel.SessionQuery{Tenant: "acme"}, []session.Session{c2, c1, s2, parent}},
		{"other tenant", kernel.SessionQuery{Tenant: "other"}, []session.Session{s3}},
		{"unknown tenant", kernel.SessionQuery{Tenant: "nobody"}, nil},
		{"agent", kernel.SessionQuery{Agent: "coder"}, []session.Session{c2, s2}},
		{"state", kernel.SessionQuery{State: session.StateRunning}, []session.Session{c1, s2}},
		{"parent", kernel.SessionQuery{ParentID: parent.ID}, []session.Session{c2, c1}},
		{"all filters", kernel.SessionQuery{Tenant: "acme", Agent: "helper", State: session.StateRunning}, []session.Session{c1}},
		{"filter and after", kernel.SessionQuery{ParentID: parent.ID, After: cursorOf(c2)}, []session.Session{c1}},
		{"filter and limit", kernel.SessionQuery{Agent: "helper", Limit: 2}, []session.Session{c1, s3}},
	}
	checkListings(t, st, tests)
}

// listing is a listing and the sessions it must return, in order.
type listing struct {
	name string
	q    kernel.SessionQuery
	want []session.Session
}

// checkListings requires each listing to return its sessions, every field
// as stored.
func checkListings(t *testing.T, st kernel.Store, listings []listing) {
	t.Helper()
	for _, l := range listings {
		t.Run(l.name, func(t *testing.T) {
			got, err := st.ListSessions(t.Context(), l.q)
			require.NoError(t, err)
			assert.Equal(t, sessionIDs(l.want), sessionIDs(got))
			assert.Equal(t, normAll(l.want, normSession), normAll(got, normSession))
		})
	}
}

// cursorOf returns the cursor that pages on after s.
func cursorOf(s session.Session) *session.Cursor {
	return &session.Cursor{CreatedAt: s.CreatedAt, ID: s.ID}
}

func testSessionListPaging(t *testing.T, st kernel.Store) {
	var want []session.Session // newest first
	for i := range 5 {
		want = append([]session.Session{mustCreateSession(t, st, createdAt(i))}, want...)
	}
	ids := sessionIDs(want)
	tests := []struct {
		name string
		q    kernel.SessionQuery
		want []string
	}{
		{"all", kernel.SessionQuery{}, ids},
		{"first page", kernel.SessionQuery{Limit: 2}, ids[:2]},
		{"second page", kernel.SessionQuery{After: cursorOf(want[1]), Limit: 2}, ids[2:4]},
		{"last page", kernel.SessionQuery{After: cursorOf(want[3]), Limit: 2}, ids[4:]},
		{"after the oldest", kernel.SessionQuery{After: cursorOf(want[4])}, []string{}},
		{"after an unstored newer session", kernel.SessionQuery{After: &session.Cursor{CreatedAt: at(10), ID: newID()}}, ids},
		{"after an unstored session in between", kernel.SessionQuery{After: &session.Cursor{CreatedAt: at(2).Add(time.Microsecond), ID: newID()}}, ids[2:]},
		{"limit above count", kernel.SessionQuery{Limit: 50}, ids},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.ListSessions(t.Context(), tt.q)
			require.NoError(t, err)
			assert.Equal(t, tt.want, sessionIDs(got))
		})
	}
	t.Run("after a deleted session", func(t *testing.T) {
		require.NoError(t, st.DeleteSession(t.Context(), want[2].ID))
		got, err := st.ListSessions(t.Context(), kernel.SessionQuery{After: cursorOf(want[2])})
		require.NoError(t, err)
		assert.Equal(t, ids[3:], sessionIDs(got))
	})
}

// createdAt returns an edit setting a session's CreatedAt to at(n).
func createdAt(n int) func(*session.Session) {
	return func(s *session.Session) { s.CreatedAt = at(n) }
}

// withID returns an edit setting a session's id (and root id).
func withID(id string) func(*session.Session) {
	return func(s *session.Session) { s.ID, s.RootID = id, id }
}

func testSessionListOrder(t *testing.T, st kernel.Store) {
	// Clients choose ids, so ids need not sort by age: the listing goes by
	// CreatedAt, and only sessions created at the same instant by id.
	late := mustCreateSession(t, st, withID("a-created-last"), createdAt(30))
	early := mustCreateSession(t, st, withID("z-created-first"), createdAt(10))
	tieLow := mustCreateSession(t, st, withID("m-tie-1"), createdAt(20))
	tieHigh := mustCreateSession(t, st, withID("m-tie-2"), createdAt(20))
	micro := mustCreateSession(t, st, withID("b-one-microsecond-later"), func(s *session.Session) {
		s.CreatedAt = at(20).Add(time.Microsecond)
	})
	want := []string{late.ID, micro.ID, tieHigh.ID, tieLow.ID, early.ID}
	assert.Equal(t, want, listIDs(t, st, kernel.SessionQuery{}))
	assert.Equal(t, want, listIDs(t, st, kernel.SessionQuery{Tenant: "acme"}), "through an index")
	assert.Equal(t, want[1:3], listIDs(t, st, kernel.SessionQuery{After: cursorOf(late), Limit: 2}))
	assert.Equal(t, want[3:], listIDs(t, st, kernel.SessionQuery{After: cursorOf(tieHigh)}))

	// An update keeps a session's place; only its CreatedAt moves it.
	early.Name = "renamed"
	require.NoError(t, st.UpdateSession(t.Context(), early))
	assert.Equal(t, want, listIDs(t, st, kernel.SessionQuery{}))
	early.Version, early.CreatedAt = early.Version+1, at(40)
	require.NoError(t, st.UpdateSession(t.Context(), early))
	assert.Equal(t, []string{early.ID, late.ID, micro.ID, tieHigh.ID, tieLow.ID}, listIDs(t, st, kernel.SessionQuery{}))
	assert.Equal(t, []string{early.ID, late.ID, micro.ID, tieHigh.ID, tieLow.ID}, listIDs(t, st, kernel.SessionQuery{Agent: "helper"}))
}

func testSessionListTies(t *testing.T, st kernel.Store) {
	var want []string // newest first: all created at once, so by id
	for range 7 {
		want = append([]string{mustCreateSession(t, st, createdAt(5)).ID}, want...)
	}
	want = append(want, mustCreateSession(t, st, createdAt(4)).ID)
	var got []string
	q := kernel.SessionQuery{Limit: 3}
	for range 10 {
		page, err := st.ListSessions(t.Context(), q)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		assert.LessOrEqual(t, len(page), 3)
		got = append(got, sessionIDs(page)...)
		q.After = cursorOf(page[len(page)-1])
	}
	assert.Equal(t, want, got, "pages of three")
}

func testSessionListMetadata(t *testing.T, st kernel.Store) {
	md := func(kv ...string) func(*session.Session) {
		return func(s *session.Session) {
			s.Metadata = map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				s.Metadata[kv[i]] = kv[i+1]
			}
		}
	}
	alice := mustCreateSession(t, st, createdAt(1), md("user", "alice", "team", "core"))
	bob := mustCreateSession(t, st, createdAt(2), md("user", "bob", "team", "core"))
	alice2 := mustCreateSession(t, st, createdAt(3), md("user", "alice", "team", "web"))
	other := mustCreateSession(t, st, createdAt(4), md("user", "alice"), func(s *session.Session) { s.Tenant = "other" })
	none := mustCreateSession(t, st, createdAt(5), md())
	// Keys and values that a careless encoding of key and value in one
	// string would confuse.
	eqKey := mustCreateSession(t, st, createdAt(6), md("a=b", "c", "x:y", "1"))
	eqValue := mustCreateSession(t, st, createdAt(7), md("a", "b=c", "x", "y:1"))
	empty := mustCreateSession(t, st, createdAt(8), md("flag", "", "ünï", "ç ö"))

	tests := []listing{
		{"one entry", kernel.SessionQuery{Metadata: map[string]string{"user": "alice"}}, []session.Session{other, alice2, alice}},
		{"two entries", kernel.SessionQuery{Metadata: map[string]string{"user": "alice", "team": "core"}}, []session.Session{alice}},
		{"entries no session has together", kernel.SessionQuery{Metadata: map[string]string{"user": "bob", "team": "web"}}, nil},
		{"value of another key", kernel.SessionQuery{Metadata: map[string]string{"user": "core"}}, nil},
		{"unknown key", kernel.SessionQuery{Metadata: map[string]string{"nope": "alice"}}, nil},
		{"with tenant", kernel.SessionQuery{Tenant: "acme", Metadata: map[string]string{"user": "alice"}}, []session.Session{alice2, alice}},
		{"with limit", kernel.SessionQuery{Metadata: map[string]string{"team": "core"}, Limit: 1}, []session.Session{bob}},
		{"with after", kernel.SessionQuery{Metadata: map[string]string{"user": "alice"}, After: cursorOf(alice2)}, []session.Session{alice}},
		{"with created after", kernel.SessionQuery{Metadata: map[string]string{"user": "alice"}, CreatedAfter: at(1)}, []session.Session{other, alice2}},
		{"key holding =", kernel.SessionQuery{Metadata: map[string]string{"a=b": "c"}}, []session.Session{eqKey}},
		{"value holding =", kernel.SessionQuery{Metadata: map[string]string{"a": "b=c"}}, []session.Session{eqValue}},
		{"key holding :", kernel.SessionQuery{Metadata: map[string]string{"x:y": "1"}}, []session.Session{eqKey}},
		{"value holding :", kernel.SessionQuery{Metadata: map[string]string{"x": "y:1"}}, []session.Session{eqValue}},
		{"empty value", kernel.SessionQuery{Metadata: map[string]string{"flag": ""}}, []session.Session{empty}},
		{"unicode", kernel.SessionQuery{Metadata: map[string]string{"ünï": "ç ö"}}, []session.Session{empty}},
		{"empty map means no filter", kernel.SessionQuery{Metadata: map[string]string{}},
			[]session.Session{empty, eqValue, eqKey, none, other, alice2, bob, alice}},
	}
	checkListings(t, st, tests)
}

func testSessionListMetadataUpdate(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	byUser := func(user string) []string {
		return listIDs(t, st, kernel.SessionQuery{Metadata: map[string]string{"user": user}})
	}
	s := mustCreateSession(t, st, func(s *session.Session) { s.Metadata = map[string]string{"user": "alice"} })
	assert.Equal(t, []string{s.ID}, byUser("alice"))

	s.Metadata = map[string]string{"user": "bob"}
	require.NoError(t, st.UpdateSession(ctx, s))
	s.Version++
	assert.Empty(t, byUser("alice"))
	assert.Equal(t, []string{s.ID}, byUser("bob"))

	s.Metadata = nil
	require.NoError(t, st.UpdateSession(ctx, s))
	assert.Empty(t, byUser("bob"))

	require.NoError(t, st.DeleteSession(ctx, s.ID))
	s.Metadata, s.Version = map[string]string{"user": "carol"}, 0
	require.NoError(t, st.CreateSession(ctx, s))
	assert.Empty(t, byUser("bob"))
	assert.Equal(t, []string{s.ID}, byUser("carol"), "created again under the same id")
}

func testSessionListCreated(t *testing.T, st kernel.Store) {
	var all []string // newest first
	for i := range 5 {
		all = append([]string{mustCreateSession(t, st, createdAt(10*i)).ID}, all...)
	}
	other := mustCreateSession(t, st, createdAt(25), func(s *session.Session) { s.Tenant = "other" })
	tests := []struct {
		name string
		q    kernel.SessionQuery
		want []string
	}{
		{"after is exclusive", kernel.SessionQuery{Tenant: "acme", CreatedAfter: at(20)}, all[:2]},
		{"after one microsecond earlier", kernel.SessionQuery{Tenant: "acme", CreatedAfter: at(20).Add(-time.Microsecond)}, all[:3]},
		{"before is exclusive", kernel.SessionQuery{Tenant: "acme", CreatedBefore: at(20)}, all[3:]},
		{"before one microsecond later", kernel.SessionQuery{Tenant: "acme", CreatedBefore: at(20).Add(time.Microsecond)}, all[2:]},
		{"before one nanosecond later", kernel.SessionQuery{Tenant: "acme", CreatedBefore: at(20).Add(time.Nanosecond)}, all[2:]},
		{"after one nanosecond earlier", kernel.SessionQuery{Tenant: "acme", CreatedAfter: at(20).Add(-time.Nanosecond)}, all[:3]},
		{"between", kernel.SessionQuery{CreatedAfter: at(0), CreatedBefore: at(40)}, []string{all[1], other.ID, all[2], all[3]}},
		{"empty range", kernel.SessionQuery{CreatedAfter: at(20), CreatedBefore: at(20)}, []string{}},
		{"with after and limit", kernel.SessionQuery{CreatedBefore: at(40), After: cursorOf(other), Limit: 2}, all[2:4]},
		{"before the first", kernel.SessionQuery{CreatedBefore: at(0)}, []string{}},
		{"after the last", kernel.SessionQuery{CreatedAfter: at(40)}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, listIDs(t, st, tt.q))
		})
	}
}

func testSessionListForkedFrom(t *testing.T, st kernel.Store) {
	origin, other := mustCreateSession(t, st), mustCreateSession(t, st)
	forkOf := func(s session.Session) func(*session.Session) {
		return func(f *session.Session) { f.ForkedFrom = s.ID }
	}
	f1 := mustCreateSession(t, st, forkOf(origin))
	mustCreateSession(t, st, forkOf(other))
	f2 := mustCreateSession(t, st, forkOf(origin), func(s *session.Session) { s.Agent = "coder" })
	forkOfFork := mustCreateSession(t, st, forkOf(f1))

	assert.Equal(t, []string{f2.ID, f1.ID}, listIDs(t, st, kernel.SessionQuery{ForkedFrom: origin.ID}))
	assert.Equal(t, []string{f1.ID}, listIDs(t, st, kernel.SessionQuery{ForkedFrom: origin.ID, Agent: "helper"}))
	assert.Equal(t, []string{forkOfFork.ID}, listIDs(t, st, kernel.SessionQuery{ForkedFrom: f1.ID}))
	assert.Equal(t, []string{f1.ID}, listIDs(t, st, kernel.SessionQuery{ForkedFrom: origin.ID, After: cursorOf(f2)}))
	assert.Empty(t, listIDs(t, st, kernel.SessionQuery{ForkedFrom: newID()}))

	// Forks outlive their origin, and say where they came from.
	require.NoError(t, st.DeleteSession(t.Context(), origin.ID))
	assert.Equal(t, []string{f2.ID, f1.ID}, listIDs(t, st, kernel.SessionQuery{ForkedFrom: origin.ID}))
}

func testSessionListEmpty(t *testing.T, st kernel.Store) {
	got, err := st.ListSessions(t.Context(), kernel.SessionQuery{})
	require.NoError(t, err)
	assert.Empty(t, got)
}

func testSessionAliasing(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	s.Metadata["team"] = "changed after create"

	got := mustGetSession(t, st, s.ID)
	got.Metadata["team"] = "changed after get"
	listed, err := st.ListSessions(ctx, kernel.SessionQuery{})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	listed[0].Metadata["team"] = "changed after list"
	assert.Equal(t, map[string]string{"team": "core"}, mustGetSession(t, st, s.ID).Metadata)

	upd := mustGetSession(t, st, s.ID)
	upd.Metadata = map[string]string{"team": "updated"}
	upd.AgentState = json.RawMessage(`{"k":"orig"}`)
	upd.Overrides = &session.Overrides{Temperature: float(1)}
	require.NoError(t, st.UpdateSession(ctx, upd))
	upd.Metadata["team"] = "changed after update"
	copy(upd.AgentState[6:], "XXXX")
	*upd.Overrides.Temperature = 2
	got = mustGetSession(t, st, s.ID)
	assert.Equal(t, map[string]string{"team": "updated"}, got.Metadata)
	assert.JSONEq(t, `{"k":"orig"}`, string(got.AgentState))
	assert.InDelta(t, 1.0, *got.Overrides.Temperature, 0)

	copy(got.AgentState[len(got.AgentState)-6:], "YYYY")
	*got.Overrides.Temperature = 3
	again := mustGetSession(t, st, s.ID)
	assert.JSONEq(t, `{"k":"orig"}`, string(again.AgentState))
	assert.InDelta(t, 1.0, *again.Overrides.Temperature, 0)
}

func testSessionCount(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	count := func(tenant string) int {
		t.Helper()
		n, err := st.CountSessions(ctx, tenant)
		require.NoError(t, err)
		return n
	}
	assert.Zero(t, count("acme"), "empty store")
	first := mustCreateSession(t, st)
	mustCreateSession(t, st)
	mustCreateSession(t, st, func(s *session.Session) { s.Tenant = "other" })
	mustCreateSession(t, st, func(s *session.Session) { s.State = session.StateClosed })
	assert.Equal(t, 3, count("acme"), "closed sessions are stored too")
	assert.Equal(t, 1, count("other"))
	require.NoError(t, st.DeleteSession(ctx, first.ID))
	assert.Equal(t, 2, count("acme"), "after a delete")
	assert.Zero(t, count("nobody"))
}
