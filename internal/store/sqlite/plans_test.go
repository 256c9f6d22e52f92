package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
)

// queryPlan returns SQLite's plan for query, one step a line.
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.rdb.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var step string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &step))
		steps = append(steps, step)
	}
	require.NoError(t, rows.Err())
	return strings.Join(steps, "\n")
}

// The listings the API and retention make must not scan the table. The
// planner has no statistics on a new database, so this is also what it
// does before the first PRAGMA optimize.
func TestQueries_UseIndexes(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	now := time.Now()
	tests := []struct {
		name  string
		q     session.Query
		index string
	}{
		{"tenant", session.Query{Tenant: "acme"}, "sessions_by_tenant (tenant=?)"},
		{"tenant page", session.Query{Tenant: "acme", Before: "x", Limit: 50}, "sessions_by_tenant (tenant=? AND id<?)"},
		{"agent", session.Query{Agent: "helper"}, "sessions_by_agent (agent=?)"},
		{"state", session.Query{State: session.StateRunning}, "sessions_by_state (state=?)"},
		{"children", session.Query{ParentID: "p"}, "sessions_by_parent (parent_id=?)"},
		{"expired", session.Query{ExpiresBefore: now, Limit: 100}, "sessions_by_expiry (expires_at<?)"},
		{"closed long ago", session.Query{State: session.StateClosed, UpdatedBefore: now, Limit: 100},
			"sessions_by_update (state=? AND updated_at<?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			query, args := sessionQuery(tt.q)
			assert.Contains(t, queryPlan(t, s, query, args...), tt.index)
		})
	}
	t.Run("idempotency key", func(t *testing.T) {
		assert.Contains(t, queryPlan(t, s, findRunByKeySQL, "s", "k", 0),
			"runs_by_idempotency_key (session_id=? AND idempotency_key=? AND created_at>?)")
	})
}
