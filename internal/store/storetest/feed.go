package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
)

// FeedStore is what the tenants' session feeds need from a store.
type FeedStore interface {
	AppendFeed(ctx context.Context, e *session.FeedEntry, keep int) error
	ReadFeed(ctx context.Context, tenant string, after int64, limit int) ([]session.FeedEntry, error)
	FeedHead(ctx context.Context, tenant string) (int64, error)
}

// RunFeed checks a store's feeds: seqs 1, 2, 3… per tenant with no gap
// however many append at once, reads from any seq in pages, tenants
// apart, and the oldest entries dropped beyond keep.
func RunFeed(t *testing.T, open func(t *testing.T) FeedStore) {
	t.Run("seqs per tenant, read after any seq", func(t *testing.T) {
		st := open(t)
		tenant := "t-" + newID() // stores shared between tests keep other feeds
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				e := session.FeedEntry{Tenant: tenant, SessionID: fmt.Sprint("s", i), Kind: "session.created",
					Time: time.Now().UTC().Truncate(time.Microsecond), Data: []byte(`{"i":` + fmt.Sprint(i) + `}`)}
				assert.NoError(t, st.AppendFeed(t.Context(), &e, 0))
				assert.Positive(t, e.Seq)
			})
		}
		wg.Wait()
		other := session.FeedEntry{Tenant: tenant + "-other", SessionID: "x", Kind: "session.deleted", Time: time.Now().UTC(), Data: []byte(`{}`)}
		require.NoError(t, st.AppendFeed(t.Context(), &other, 0))
		assert.Equal(t, int64(1), other.Seq, "each tenant counts its own")

		all, err := st.ReadFeed(t.Context(), tenant, 0, 0)
		require.NoError(t, err)
		require.Len(t, all, 20)
		seen := map[string]bool{}
		for i, e := range all {
			assert.Equal(t, int64(i+1), e.Seq)
			assert.Equal(t, tenant, e.Tenant)
			assert.Equal(t, "session.created", e.Kind)
			assert.JSONEq(t, `{"i":`+e.SessionID[1:]+`}`, string(e.Data))
			seen[e.SessionID] = true
		}
		assert.Len(t, seen, 20)
		page, err := st.ReadFeed(t.Context(), tenant, 17, 2)
		require.NoError(t, err)
		require.Len(t, page, 2)
		assert.Equal(t, []int64{18, 19}, []int64{page[0].Seq, page[1].Seq})
		none, err := st.ReadFeed(t.Context(), tenant, 20, 0)
		require.NoError(t, err)
		assert.Empty(t, none)
		head, err := st.FeedHead(t.Context(), tenant)
		require.NoError(t, err)
		assert.Equal(t, int64(20), head)
		head, err = st.FeedHead(t.Context(), "t-"+newID())
		require.NoError(t, err)
		assert.Zero(t, head, "a tenant without a feed")
	})

	t.Run("keeps about the newest keep entries", func(t *testing.T) {
		st := open(t)
		tenant := "t-" + newID()
		for range 300 {
			e := session.FeedEntry{Tenant: tenant, SessionID: "s", Kind: "session.updated", Time: time.Now().UTC(), Data: []byte(`{}`)}
			require.NoError(t, st.AppendFeed(t.Context(), &e, 100))
		}
		all, err := st.ReadFeed(t.Context(), tenant, 0, 0)
		require.NoError(t, err)
		// Redis trims approximately: never below keep, never all of it.
		assert.GreaterOrEqual(t, len(all), 100)
		assert.Less(t, len(all), 300)
		assert.Equal(t, int64(300), all[len(all)-1].Seq)
	})
}
