package sqlite

import (
	"database/sql"
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
	r, err := s.acquire(t.Context())
	require.NoError(t, err)
	defer s.release(r)
	rows, err := r.query(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
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

// The listings the API and retention make must not scan the table, and
// the API's pages must come off an index in the listing's order, without
// sorting, so that a page costs its own size whatever the table holds.
// The planner has no statistics on a new database, so this is also what
// it does before the first PRAGMA optimize; TestListSessions_100k checks
// the plans again with statistics.
func TestQueries_UseIndexes(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	checkSessionPlans(t, s)
	checkRunPlans(t, s)
}

// sessionPlans are the listings of sessions the kernel makes, with the
// index each must use and whether it may sort.
var sessionPlans = func() []struct {
	name   string
	q      session.Query
	index  string
	sorted bool
} {
	now := time.Now()
	after := &session.Cursor{CreatedAt: now, ID: "x"}
	alice := map[string]string{"user": "alice"}
	return []struct {
		name   string
		q      session.Query
		index  string
		sorted bool
	}{
		{"all", session.Query{Limit: 50}, "SCAN sessions USING INDEX sessions_by_created", false},
		{"all, next page", session.Query{After: after, Limit: 50}, "sessions_by_created ((created_at,id)<(?,?))", false},
		{"tenant", session.Query{Tenant: "acme", Limit: 50}, "sessions_by_tenant (tenant=?)", false},
		{"tenant page", session.Query{Tenant: "acme", After: after, Limit: 50}, "sessions_by_tenant (tenant=? AND (created_at,id)<(?,?))", false},
		{"agent", session.Query{Tenant: "acme", Agent: "helper", Limit: 50}, "(agent=?)", false},
		{"state", session.Query{State: session.StateRunning}, "sessions_by_state (state=?)", false},
		{"children", session.Query{Tenant: "acme", ParentID: "p", After: after, Limit: 50}, "sessions_by_parent (parent_id=? AND (created_at,id)<(?,?))", false},
		{"forks", session.Query{Tenant: "acme", ForkedFrom: "p", Limit: 50}, "sessions_by_fork (forked_from=?)", false},
		{"created between", session.Query{Tenant: "acme", CreatedAfter: now, CreatedBefore: now, Limit: 50},
			"sessions_by_tenant (tenant=? AND created_at>? AND created_at<?)", false},
		{"metadata", session.Query{Tenant: "acme", Metadata: alice, Limit: 50},
			"SEARCH m USING COVERING INDEX session_metadata_by_value (key=? AND value=?)", false},
		{"metadata page", session.Query{Tenant: "acme", Metadata: alice, After: after, Limit: 50},
			"session_metadata_by_value (key=? AND value=? AND (created_at,session_id)<(?,?))", false},
		{"metadata, two entries, created after", session.Query{Tenant: "acme", Agent: "helper",
			Metadata: map[string]string{"user": "alice", "team": "core"}, CreatedAfter: now, Limit: 50},
			"session_metadata_by_value (key=? AND value=? AND created_at>?)", false},
		{"expired", session.Query{ExpiresBefore: now, Limit: 100}, "sessions_by_expiry (expires_at<?)", true},
		{"closed long ago", session.Query{State: session.StateClosed, UpdatedBefore: now, Limit: 100},
			"sessions_by_update (state=? AND updated_at<?)", true},
	}
}()

// checkSessionPlans requires every listing of sessionPlans to use its
// index, and not to sort unless it may.
func checkSessionPlans(t *testing.T, s *Store) {
	t.Helper()
	for _, tt := range sessionPlans {
		t.Run("sessions/"+tt.name, func(t *testing.T) {
			query, args := sessionQuery(tt.q)
			plan := queryPlan(t, s, query, args...)
			assert.Contains(t, plan, tt.index)
			assert.NotRegexp(t, `(?m)^SCAN \w+$`, plan, "a scan without an index")
			if !tt.sorted {
				assert.NotContains(t, plan, "TEMP B-TREE", "a page sorted rather than read in order")
			}
			if len(tt.q.Metadata) > 1 {
				assert.Contains(t, plan, "SEARCH session_metadata EXISTS USING PRIMARY KEY (session_id=? AND key=?)")
			}
			if len(tt.q.Metadata) > 0 {
				assert.Contains(t, plan, "SEARCH s USING PRIMARY KEY (id=?)")
			}
		})
	}
}

// checkRunPlans requires a session's runs to be listed through its own
// index entries: in order when no states or one state are asked for, and
// otherwise sorting only the runs in those states.
func checkRunPlans(t *testing.T, s *Store) {
	t.Helper()
	busy := []session.RunState{session.RunQueued, session.RunRunning, session.RunWaitingInput}
	tests := []struct {
		name   string
		q      session.RunQuery
		index  string
		sorted bool
	}{
		{"all", session.RunQuery{Limit: 20}, "runs_by_session (session_id=?)", false},
		{"page", session.RunQuery{Before: "r", Limit: 20}, "runs_by_session (session_id=? AND rowid<?)", false},
		{"queued", session.RunQuery{States: busy[:1]}, "runs_by_session_state (session_id=? AND state=?)", false},
		{"oldest queued", session.RunQuery{States: busy[:1], Before: "r", Limit: 1},
			"runs_by_session_state (session_id=? AND state=? AND rowid<?)", false},
		{"busy", session.RunQuery{States: busy, Limit: 1}, "runs_by_session_state (session_id=? AND state=?)", true},
	}
	for _, tt := range tests {
		t.Run("runs/"+tt.name, func(t *testing.T) {
			query, args := runsQuery("s", tt.q)
			plan := queryPlan(t, s, query, args...)
			assert.Contains(t, plan, tt.index)
			assert.NotContains(t, plan, "SCAN runs")
			if !tt.sorted {
				assert.NotContains(t, plan, "TEMP B-TREE")
			}
		})
	}
	t.Run("runs/idempotency key", func(t *testing.T) {
		assert.Contains(t, queryPlan(t, s, findRunByKeySQL, "s", "k", 0),
			"runs_by_idempotency_key (session_id=? AND idempotency_key=? AND created_at>?)")
	})
	t.Run("runs/queued count", func(t *testing.T) {
		assert.Contains(t, queryPlan(t, s, stmtSQL[stmtCountQueued], "s"),
			"COVERING INDEX runs_by_session_state (session_id=? AND state=?)")
	})
}

// statistics are sqlite_stat1 rows of a database of 100,000 sessions of
// one tenant and agent, with two metadata entries each (a user among 100
// and a team among 2), and a million runs, 100 a session: as ANALYZE left
// them with no limit (full), and as PRAGMA optimize leaves them, sampling
// 400 rows an index (sampled). Both mislead a planner left to itself: full
// says a tenant selects every session, sampled that it selects 401.
var statistics = map[string][][3]string{
	"full": {
		{"session_metadata", "session_metadata", "200000 2 1"},
		{"session_metadata", "session_metadata_by_value", "200000 100000 1942 1 1"},
		{"sessions", "sessions", "100000 1"},
		{"sessions", "sessions_by_agent", "100000 100000 1 1"},
		{"sessions", "sessions_by_created", "100000 1 1"},
		{"sessions", "sessions_by_state", "100000 100000 1 1"},
		{"sessions", "sessions_by_tenant", "100000 100000 1 1"},
		{"sessions", "sessions_by_update", "100000 100000 1"},
		{"runs", "sqlite_autoindex_runs_1", "1000000 100 1"},
		{"runs", "runs_by_session", "1000000 100"},
		{"runs", "runs_by_session_state", "1000000 100 50"},
		{"runs", "runs_by_state", "1000000 500000 1 1"},
		{"runs", "runs_by_idempotency_key", "1000 1 1 1"},
	},
	"sampled": {
		{"session_metadata", "session_metadata", "200000 2 1"},
		{"session_metadata", "session_metadata_by_value", "200000 401 267 1 1"},
		{"sessions", "sessions", "100000 1"},
		{"sessions", "sessions_by_agent", "100000 401 1 1"},
		{"sessions", "sessions_by_created", "100000 1 1"},
		{"sessions", "sessions_by_state", "100000 401 1 1"},
		{"sessions", "sessions_by_tenant", "100000 401 1 1"},
		{"sessions", "sessions_by_update", "100000 401 1"},
		{"runs", "sqlite_autoindex_runs_1", "1000000 401 1"},
		{"runs", "runs_by_session", "1000000 401"},
		{"runs", "runs_by_session_state", "1000000 401 200"},
		{"runs", "runs_by_state", "1000000 401 1 1"},
		{"runs", "runs_by_idempotency_key", "1000 1 1 1"},
	},
}

// TestQueries_UseIndexesWithStatistics plans the listings of
// TestQueries_UseIndexes on a database whose statistics describe 100,000
// sessions, without writing them: the planner plans by sqlite_stat1 alone.
func TestQueries_UseIndexesWithStatistics(t *testing.T) {
	for name, rows := range statistics {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kerneld.db")
			s, err := Open(t.Context(), Options{Path: path})
			require.NoError(t, err)
			require.NoError(t, s.Close())
			writeStatistics(t, path, rows)
			s = mustOpenInternal(t, path) // loads them
			checkSessionPlans(t, s)
			checkRunPlans(t, s)
		})
	}
}

// writeStatistics replaces the statistics of the database at path.
func writeStatistics(t *testing.T, path string, rows [][3]string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	ctx := t.Context()
	_, err = db.ExecContext(ctx, `ANALYZE; DELETE FROM sqlite_stat1`) // ANALYZE creates the table
	require.NoError(t, err)
	for _, r := range rows {
		_, err := db.ExecContext(ctx, `INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (?, ?, ?)`, r[0], r[1], r[2])
		require.NoError(t, err)
	}
}
