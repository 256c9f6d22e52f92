package storetest

import (
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
	{"list filters by tenant agent state and parent", testSessionListFilters},
	{"list pages newest first", testSessionListPaging},
	{"list filters by expiry for retention", testSessionListExpiresBefore},
	{"list filters by last update for retention", testSessionListUpdatedBefore},
	{"list of an empty store is empty", testSessionListEmpty},
	{"values never alias the store", testSessionAliasing},
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
		s.InheritMemory = "copy"
	})
	got := mustGetSession(t, st, want.ID)
	assert.Equal(t, normSession(want), normSession(got))
	assert.Zero(t, got.LastSeq, "LastSeq of a new session")
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
	require.NoError(t, st.UpdateSession(t.Context(), s))
	assert.Equal(t, normSession(s), normSession(mustGetSession(t, st, s.ID)))

	// Replace, not merge: emptied fields come back empty.
	s.Name, s.Metadata, s.ActiveRunID, s.TTL, s.ExpiresAt = "", nil, "", 0, time.Time{}
	require.NoError(t, st.UpdateSession(t.Context(), s))
	assert.Equal(t, normSession(s), normSession(mustGetSession(t, st, s.ID)))
}

func testSessionListFilters(t *testing.T, st kernel.Store) {
	parent := mustCreateSession(t, st)
	s2 := mustCreateSession(t, st, func(s *session.Session) { s.Agent, s.State = "coder", session.StateRunning })
	s3 := mustCreateSession(t, st, func(s *session.Session) { s.Tenant, s.State = "other", session.StateCompleted })
	c1 := mustCreateSession(t, st, childOf(parent), func(s *session.Session) { s.State = session.StateRunning })
	c2 := mustCreateSession(t, st, childOf(parent), func(s *session.Session) { s.Agent, s.State = "coder", session.StateClosed })

	tests := []struct {
		name string
		q    kernel.SessionQuery
		want []session.Session
	}{
		{"no filter", kernel.SessionQuery{}, []session.Session{c2, c1, s3, s2, parent}},
		{"tenant", kernel.SessionQuery{Tenant: "acme"}, []session.Session{c2, c1, s2, parent}},
		{"other tenant", kernel.SessionQuery{Tenant: "other"}, []session.Session{s3}},
		{"unknown tenant", kernel.SessionQuery{Tenant: "nobody"}, nil},
		{"agent", kernel.SessionQuery{Agent: "coder"}, []session.Session{c2, s2}},
		{"state", kernel.SessionQuery{State: session.StateRunning}, []session.Session{c1, s2}},
		{"parent", kernel.SessionQuery{ParentID: parent.ID}, []session.Session{c2, c1}},
		{"all filters", kernel.SessionQuery{Tenant: "acme", Agent: "helper", State: session.StateRunning}, []session.Session{c1}},
		{"filter and before", kernel.SessionQuery{ParentID: parent.ID, Before: c2.ID}, []session.Session{c1}},
		{"filter and limit", kernel.SessionQuery{Agent: "helper", Limit: 2}, []session.Session{c1, s3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.ListSessions(t.Context(), tt.q)
			require.NoError(t, err)
			assert.Equal(t, sessionIDs(tt.want), sessionIDs(got))
			assert.Equal(t, normAll(tt.want, normSession), normAll(got, normSession))
		})
	}
}

func testSessionListPaging(t *testing.T, st kernel.Store) {
	var ids []string // newest first
	for range 5 {
		ids = append([]string{mustCreateSession(t, st).ID}, ids...)
	}
	tests := []struct {
		name string
		q    kernel.SessionQuery
		want []string
	}{
		{"all", kernel.SessionQuery{}, ids},
		{"first page", kernel.SessionQuery{Limit: 2}, ids[:2]},
		{"second page", kernel.SessionQuery{Before: ids[1], Limit: 2}, ids[2:4]},
		{"last page", kernel.SessionQuery{Before: ids[3], Limit: 2}, ids[4:]},
		{"before the oldest", kernel.SessionQuery{Before: ids[4]}, []string{}},
		{"before an unstored newer id", kernel.SessionQuery{Before: newID()}, ids},
		{"limit above count", kernel.SessionQuery{Limit: 50}, ids},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.ListSessions(t.Context(), tt.q)
			require.NoError(t, err)
			assert.Equal(t, tt.want, sessionIDs(got))
		})
	}
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
	require.NoError(t, st.UpdateSession(ctx, upd))
	upd.Metadata["team"] = "changed after update"
	assert.Equal(t, map[string]string{"team": "updated"}, mustGetSession(t, st, s.ID).Metadata)
}
