package memory

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
)

// seedBase is the CreatedAt of the first session seed creates.
var seedBase = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// seed creates n sessions of tenant "acme", as the SQLite store's
// listing test does: session i (from 1) is created i seconds after
// seedBase and belongs to user "alice" if i is a multiple of 1000, to
// "user<i%100>" otherwise.
func seed(tb testing.TB, n int) *Store {
	tb.Helper()
	s := New()
	for i := 1; i <= n; i++ {
		user := fmt.Sprint("user", i%100)
		if i%1000 == 0 {
			user = "alice"
		}
		id := fmt.Sprintf("s%07d", i)
		require.NoError(tb, s.CreateSession(tb.Context(), session.Session{ID: id, RootID: id, Tenant: "acme",
			Agent: "helper", State: session.StateCompleted, CreatedAt: seedBase.Add(time.Duration(i) * time.Second),
			Metadata: map[string]string{"user": user}}))
	}
	return s
}

// TestListSessions_100k lists a user's sessions among 100,000 and checks
// that the listing reads only the sessions holding the entry, not all of
// them: the metadata index serves it. Seeding takes seconds under the
// race detector, so it runs without: .ci/run runs it after make test.
func TestListSessions_100k(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("seeds 100,000 sessions: run without -short and -race")
	}
	const n = 100_000
	s := seed(t, n)
	q := session.Query{Tenant: "acme", Metadata: map[string]string{"user": "alice"}, Limit: 50}
	assert.Len(t, s.candidates(q), n/1000, "sessions read for alice's")
	q.Metadata["nobody"] = "x"
	assert.Empty(t, s.candidates(q), "an entry no session holds reads none")
	delete(q.Metadata, "nobody")

	page, err := s.ListSessions(t.Context(), q)
	require.NoError(t, err)
	require.Len(t, page, 50)
	assert.Equal(t, "s0100000", page[0].ID)
	assert.Equal(t, "s0051000", page[49].ID)
	best := time.Hour
	for range 5 {
		start := time.Now()
		_, err = s.ListSessions(t.Context(), q)
		require.NoError(t, err)
		best = min(best, time.Since(start))
	}
	t.Logf("a page of alice's sessions among %d: %v (best of 5)", n, best)
}

// BenchmarkListSessions100k lists a page of one user's sessions among
// 100,000.
func BenchmarkListSessions100k(b *testing.B) {
	s := seed(b, 100_000)
	for _, bm := range []struct {
		name string
		md   map[string]string
	}{
		{"metadata=1in1000", map[string]string{"user": "alice"}},
		{"metadata=1in100", map[string]string{"user": "user7"}},
	} {
		q := session.Query{Tenant: "acme", Metadata: bm.md, Limit: 51}
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if page, err := s.ListSessions(b.Context(), q); err != nil || len(page) == 0 {
					b.Fatalf("listed %d sessions, err %v", len(page), err)
				}
			}
		})
	}
}
