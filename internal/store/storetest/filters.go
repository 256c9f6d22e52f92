package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// testSessionListCombined lists sessions by every combination of filters
// the API offers, in pages of two, and compares each listing with the
// sessions session.Query.Matches selects, newest first: the store's own
// indexes must agree with the rule, whichever of them it reads.
func testSessionListCombined(t *testing.T, st kernel.Store) {
	parent := mustCreateSession(t, st, createdAt(0))
	all := []session.Session{parent}
	tenants, agents := []string{"acme", "other"}, []string{"helper", "coder"}
	states := []session.State{session.StateActive, session.StateRunning, session.StateCompleted}
	orgs := map[string]string{"acme": "initech", "other": "globex"}
	for i := 1; i <= 60; i++ {
		all = append(all, mustCreateSession(t, st, createdAt(i/2), func(s *session.Session) {
			s.Tenant, s.Agent, s.State = tenants[i%2], agents[i/2%2], states[i/4%3]
			s.Metadata = map[string]string{"user": fmt.Sprint("u", i/3%4), "team": fmt.Sprint("t", i%5%3), "org": orgs[s.Tenant]}
			if i%5 == 0 {
				s.ParentID, s.RootID, s.Depth = parent.ID, parent.ID, 1
			}
			if i%3 == 0 {
				s.Title = fmt.Sprint("Trip to Paris ", i%4)
			} else if i%7 == 0 {
				s.Name = "paris notes"
			}
		}))
	}
	// A deleted session leaves every index.
	require.NoError(t, st.DeleteSession(t.Context(), all[7].ID))
	all = append(all[:7], all[8:]...)

	for _, c := range combinedQueries(parent.ID) {
		q := c.q
		t.Run(c.name, func(t *testing.T) {
			var want []string
			for i := len(all) - 1; i >= 0; i-- { // created in order: newest last
				if q.Matches(&all[i]) {
					want = append(want, all[i].ID)
				}
			}
			assert.Equal(t, want, listAllPages(t, st, q, 2))
			assert.Equal(t, c.empty, len(want) == 0, "the listing is empty: the case tests what it says")
		})
	}
}

// combinedQueries are the filter combinations testSessionListCombined
// tries.
func combinedQueries(parentID string) []struct {
	name  string
	q     kernel.SessionQuery
	empty bool
} {
	user := map[string]string{"user": "u1"}
	both := map[string]string{"user": "u2", "team": "t2"}
	return []struct {
		name  string
		q     kernel.SessionQuery
		empty bool
	}{
		{"metadata", kernel.SessionQuery{Tenant: "acme", Metadata: user}, false},
		{"a value of the other tenant only", kernel.SessionQuery{Tenant: "acme", Metadata: map[string]string{"org": "globex"}}, true},
		{"two entries", kernel.SessionQuery{Tenant: "acme", Metadata: both}, false},
		{"metadata and agent", kernel.SessionQuery{Tenant: "acme", Metadata: map[string]string{"user": "u2"}, Agent: "coder"}, false},
		{"metadata and state", kernel.SessionQuery{Tenant: "acme", Metadata: both, State: session.StateRunning}, false},
		{"metadata and parent", kernel.SessionQuery{Tenant: "acme", Metadata: map[string]string{"team": "t0"}, ParentID: parentID}, false},
		{"metadata and creation range", kernel.SessionQuery{Tenant: "acme", Metadata: user, CreatedAfter: at(4), CreatedBefore: at(14)}, false},
		{"agent state and creation", kernel.SessionQuery{Tenant: "acme", Agent: "helper", State: session.StateCompleted, CreatedBefore: at(10)}, false},
		{"everything", kernel.SessionQuery{Tenant: "acme", Metadata: both, Agent: "coder", State: session.StateRunning, CreatedAfter: at(1), CreatedBefore: at(40)}, false},
		{"entries no session has together", kernel.SessionQuery{Tenant: "acme", Metadata: map[string]string{"user": "u1", "team": "nobody"}}, true},
		{"unknown tenant", kernel.SessionQuery{Tenant: "nobody", Metadata: user}, true},
		{"title or name, any case", kernel.SessionQuery{Tenant: "acme", Search: "PARIS"}, false},
		{"title and metadata", kernel.SessionQuery{Tenant: "acme", Search: "paris 2", Metadata: map[string]string{"team": "t0"}}, false},
		{"a title no session has", kernel.SessionQuery{Tenant: "acme", Search: "London"}, true},
	}
}

// listAllPages lists q in pages of size, following each page's last
// session, and returns the ids listed.
func listAllPages(t *testing.T, st kernel.Store, q kernel.SessionQuery, size int) []string {
	t.Helper()
	q.Limit = size
	var got []string
	for range 100 {
		page, err := st.ListSessions(t.Context(), q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), size)
		got = append(got, sessionIDs(page)...)
		if len(page) < size {
			return got
		}
		q.After = cursorOf(page[len(page)-1])
	}
	t.Fatal("listing never ended")
	return nil
}
