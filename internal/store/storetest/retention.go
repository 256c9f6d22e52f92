package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// Retention lists sessions by time: ExpiresBefore finds the sessions due
// to be closed, UpdatedBefore the closed ones due to be deleted. Both
// bounds are exclusive, and both combine with the other filters.

// expiring returns an edit setting a session's ExpiresAt to at(n).
func expiring(n int) func(*session.Session) {
	return func(s *session.Session) { s.ExpiresAt = at(n) }
}

// updated returns an edit setting a session's UpdatedAt to at(n).
func updated(n int) func(*session.Session) {
	return func(s *session.Session) { s.UpdatedAt = at(n) }
}

// listIDs returns the ids ListSessions(q) returns, in order.
func listIDs(t *testing.T, st kernel.Store, q kernel.SessionQuery) []string {
	t.Helper()
	got, err := st.ListSessions(t.Context(), q)
	require.NoError(t, err)
	return sessionIDs(got)
}

func testSessionListExpiresBefore(t *testing.T, st kernel.Store) {
	soon := mustCreateSession(t, st, expiring(10))
	never := mustCreateSession(t, st)
	later := mustCreateSession(t, st, expiring(20))
	other := mustCreateSession(t, st, expiring(5), func(s *session.Session) { s.Tenant = "other" })
	tests := []struct {
		name string
		q    kernel.SessionQuery
		want []string
	}{
		{"before the first expiry", kernel.SessionQuery{ExpiresBefore: at(5)}, []string{}},
		{"bound is exclusive", kernel.SessionQuery{ExpiresBefore: at(10)}, []string{other.ID}},
		{"one microsecond later", kernel.SessionQuery{ExpiresBefore: at(10).Add(time.Microsecond)}, []string{other.ID, soon.ID}},
		{"one nanosecond later", kernel.SessionQuery{ExpiresBefore: at(10).Add(time.Nanosecond)}, []string{other.ID, soon.ID}},
		{"all that expire", kernel.SessionQuery{ExpiresBefore: at(100)}, []string{other.ID, later.ID, soon.ID}},
		{"with tenant", kernel.SessionQuery{Tenant: "acme", ExpiresBefore: at(100)}, []string{later.ID, soon.ID}},
		{"with limit", kernel.SessionQuery{ExpiresBefore: at(100), Limit: 1}, []string{other.ID}},
		{"with after", kernel.SessionQuery{ExpiresBefore: at(100), After: cursorOf(later)}, []string{soon.ID}},
		{"zero means no filter", kernel.SessionQuery{}, []string{other.ID, later.ID, never.ID, soon.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, listIDs(t, st, tt.q))
		})
	}
	t.Run("an update moves a session in and out", func(t *testing.T) {
		soon.ExpiresAt, never.ExpiresAt = time.Time{}, at(1)
		require.NoError(t, st.UpdateSession(t.Context(), soon))
		require.NoError(t, st.UpdateSession(t.Context(), never))
		assert.Equal(t, []string{other.ID, never.ID}, listIDs(t, st, kernel.SessionQuery{ExpiresBefore: at(15)}))
	})
}

func testSessionListUpdatedBefore(t *testing.T, st kernel.Store) {
	closed := func(s *session.Session) { s.State = session.StateClosed }
	old := mustCreateSession(t, st, updated(1), closed)
	oldOpen := mustCreateSession(t, st, updated(2))
	recent := mustCreateSession(t, st, updated(9), closed)
	tests := []struct {
		name string
		q    kernel.SessionQuery
		want []string
	}{
		{"before the first update", kernel.SessionQuery{UpdatedBefore: at(1)}, []string{}},
		{"bound is exclusive", kernel.SessionQuery{UpdatedBefore: at(2)}, []string{old.ID}},
		{"one nanosecond later", kernel.SessionQuery{UpdatedBefore: at(2).Add(time.Nanosecond)}, []string{oldOpen.ID, old.ID}},
		{"all updated before", kernel.SessionQuery{UpdatedBefore: at(10)}, []string{recent.ID, oldOpen.ID, old.ID}},
		{"closed ones", kernel.SessionQuery{State: session.StateClosed, UpdatedBefore: at(5)}, []string{old.ID}},
		{"with expiry", kernel.SessionQuery{UpdatedBefore: at(5), ExpiresBefore: at(5)}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, listIDs(t, st, tt.q))
		})
	}
	t.Run("an update moves a session out", func(t *testing.T) {
		old.UpdatedAt = at(20)
		require.NoError(t, st.UpdateSession(t.Context(), old))
		assert.Equal(t, []string{oldOpen.ID}, listIDs(t, st, kernel.SessionQuery{UpdatedBefore: at(5)}))
	})
}
