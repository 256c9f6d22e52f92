package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
)

// seedBase is the CreatedAt of the first session seedSessions writes.
var seedBase = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// seedSessions writes n sessions of tenant "acme" straight into the
// database, in one statement, as n calls of CreateSession would leave
// them: session i (from 1) is created i seconds after seedBase, belongs to
// user "alice" if i is a multiple of 1000 and to "user<i%100>" otherwise,
// and has a team, "core" or "web". Then it runs ANALYZE, as PRAGMA
// optimize does on a database that size, so that the planner plans with
// statistics. SQL rather than CreateSession calls keeps it to seconds
// under the race detector.
func seedSessions(tb testing.TB, s *Store, n int) {
	tb.Helper()
	err := s.write(tb.Context(), func(tx *batchTx) (own, err error) {
		for _, stmt := range []string{
			fmt.Sprintf(`CREATE TEMP TABLE seed AS
				WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < %d)
				SELECT printf('s%%07d', i) AS id, %d + i * 1000000 AS created_at,
					iif(i %% 1000 = 0, 'alice', 'user' || (i %% 100)) AS user,
					iif(i %% 2 = 0, 'core', 'web') AS team
				FROM seq`, n, seedBase.UnixMicro()),
			`INSERT INTO sessions (id, tenant, agent, name, metadata, state, parent_id, root_id, depth,
				created_at, updated_at, ttl, expires_at, last_seq, active_run_id, inherit_memory,
				forked_from, version, ext)
				SELECT id, 'acme', 'helper', '', '{"team":"' || team || '","user":"' || user || '"}',
					'completed', '', id, 0, created_at, created_at, 0, NULL, 0, '', '', '', 0, NULL
				FROM seed`,
			`INSERT INTO session_metadata (session_id, key, value, created_at)
				SELECT id, 'user', user, created_at FROM seed
				UNION ALL SELECT id, 'team', team, created_at FROM seed`,
			`DROP TABLE seed`,
			// As PRAGMA optimize does: statistics from a sample.
			`PRAGMA analysis_limit = 400`,
			`ANALYZE`,
		} {
			if _, err := tx.conn.ExecContext(tx.ctx, stmt); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	require.NoError(tb, err, "seed %d sessions", n)
}

// seeded returns the id of session i of seedSessions.
func seeded(i int) string { return fmt.Sprintf("s%07d", i) }

// TestListSessions_100k lists a user's sessions among 100,000, as
// GET /sessions?metadata.user=alice does, and checks that pages come off
// the metadata index: the plans (with the statistics of that data) read no
// session but the page's, and a page takes about as long as a page of a
// table of 100 sessions, not the thousand times longer of a scan.
//
// Seeding takes seconds, but minutes under the race detector, so it runs
// without: .ci/run runs it so after make test.
func TestListSessions_100k(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("seeds 100,000 sessions: run without -short and -race")
	}
	const n = 100_000
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	seedSessions(t, s, n)
	checkSessionPlans(t, s)
	ctx := t.Context()

	// Alice has sessions 1000, 2000, … 100000: pages of 50, newest first.
	q := session.Query{Tenant: "acme", Metadata: map[string]string{"user": "alice"}, Limit: 50}
	var got []string
	for range 3 {
		page, err := s.ListSessions(ctx, q)
		require.NoError(t, err)
		for _, sess := range page {
			got = append(got, sess.ID)
		}
		if len(page) < q.Limit {
			break
		}
		last := page[len(page)-1]
		q.After = &session.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	require.Len(t, got, 100)
	for i, id := range got {
		require.Equal(t, seeded(n-1000*i), id, "session %d of alice's", i)
	}
	page, err := s.ListSessions(ctx, session.Query{Tenant: "acme", Limit: 50,
		Metadata: map[string]string{"user": "alice", "team": "core"}})
	require.NoError(t, err)
	require.Len(t, page, 50)
	assert.Equal(t, seeded(n), page[0].ID)

	// The same page from a table of 100 sessions, for scale.
	small := mustOpenInternal(t, filepath.Join(t.TempDir(), "small.db"))
	seedSessions(t, small, 100)
	alice := session.Query{Tenant: "acme", Metadata: map[string]string{"user": "alice"}, Limit: 50}
	bigPage, smallPage := pageTime(t, s, alice), pageTime(t, small, session.Query{Tenant: "acme",
		Metadata: map[string]string{"user": "user7"}, Limit: 50})
	t.Logf("a page of alice's sessions: %v among %d sessions, %v among 100", bigPage, n, smallPage)
	assert.Less(t, bigPage, 20*smallPage+5*time.Millisecond,
		"a page among %d sessions costs what it costs among 100, give or take the cache", n)
}

// pageTime returns the best time of a few ListSessions(q).
func pageTime(t *testing.T, s *Store, q session.Query) time.Duration {
	t.Helper()
	best := time.Hour
	for range 5 {
		start := time.Now()
		_, err := s.ListSessions(t.Context(), q)
		require.NoError(t, err)
		best = min(best, time.Since(start))
	}
	return best
}

// BenchmarkListSessions100k lists pages of 50 of 100,000 sessions the
// ways the API does.
func BenchmarkListSessions100k(b *testing.B) {
	const n = 100_000
	s, err := Open(b.Context(), Options{Path: filepath.Join(b.TempDir(), "kerneld.db")})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, s.Close()) })
	seedSessions(b, s, n)
	middle := &session.Cursor{CreatedAt: seedBase.Add(n / 2 * time.Second), ID: seeded(n / 2)}
	for _, bm := range []struct {
		name string
		q    session.Query
	}{
		{"tenant", session.Query{Tenant: "acme"}},
		{"tenant/middle", session.Query{Tenant: "acme", After: middle}},
		{"metadata=1in1000", session.Query{Tenant: "acme", Metadata: map[string]string{"user": "alice"}}},
		{"metadata=1in1000/middle", session.Query{Tenant: "acme", Metadata: map[string]string{"user": "alice"}, After: middle}},
		{"metadata=1in100", session.Query{Tenant: "acme", Metadata: map[string]string{"user": "user7"}}},
		{"metadata=1in2", session.Query{Tenant: "acme", Metadata: map[string]string{"team": "core"}}},
		{"metadata=two", session.Query{Tenant: "acme", Metadata: map[string]string{"user": "user7", "team": "web"}}},
		{"created-before", session.Query{Tenant: "acme", CreatedBefore: seedBase.Add(n / 2 * time.Second)}},
	} {
		bm.q.Limit = 51 // a page of 50 and whether there is another
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				page, err := s.ListSessions(b.Context(), bm.q)
				if err != nil || len(page) == 0 {
					b.Fatalf("listed %d sessions, err %v", len(page), err)
				}
			}
		})
	}
}

// TestLeadEntry checks that a listing by two metadata entries walks the
// index of the one fewer sessions hold, whichever key sorts first.
func TestLeadEntry(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	seedSessions(t, s, 1000)
	for _, tt := range []struct {
		md   map[string]string
		want string
	}{
		{map[string]string{"team": "web", "user": "user7"}, "user"},
		{map[string]string{"team": "web", "user": "nobody"}, "user"},
		{map[string]string{"team": "nothing", "user": "user7"}, "team"},
		{map[string]string{"user": "alice"}, ""},
	} {
		r, err := s.acquire(t.Context())
		require.NoError(t, err)
		got, err := r.leadEntry(t.Context(), tt.md)
		s.release(r)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "lead of %v", tt.md)
	}
}
