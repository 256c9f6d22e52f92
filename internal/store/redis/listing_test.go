package redis

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// loadCounter counts the sessions a store loads: the HMGETs of session
// hashes it sends, alone or in pipelines.
type loadCounter struct{ n atomic.Int64 }

func (c *loadCounter) count(cmds ...goredis.Cmder) {
	for _, cmd := range cmds {
		if strings.EqualFold(cmd.Name(), "hmget") {
			c.n.Add(1)
		}
	}
}

func (c *loadCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *loadCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *loadCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.count(cmds...)
		return next(ctx, cmds)
	}
}

// TestListSessionsReadsTheSmallestIndex lists sessions by filters that
// few of them pass, and checks that the store loads only the sessions it
// lists: it reads the index of the filter with the fewest candidates, in
// listing order, and stops at the page.
func TestListSessionsReadsTheSmallestIndex(t *testing.T) {
	srv := redistest.Use(t)
	ctx := t.Context()
	st, err := Open(ctx, Options{URL: srv.URL, Prefix: srv.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })

	const n = 300
	base := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	var alice, running []string // newest first
	for i := range n {
		id := fmt.Sprintf("s%03d", i)
		s := session.Session{ID: id, RootID: id, Tenant: "acme", Agent: "helper", State: session.StateCompleted,
			CreatedAt: base.Add(time.Duration(i) * time.Second), UpdatedAt: base}
		if i%50 == 0 {
			s.Metadata = map[string]string{"user": "alice"}
			alice = append([]string{id}, alice...)
		}
		if i%100 == 1 {
			s.State = session.StateRunning
			running = append([]string{id}, running...)
		}
		require.NoError(t, st.CreateSession(ctx, s))
	}
	loads := new(loadCounter)
	st.rdb.AddHook(loads)
	ids := func(ss []session.Session) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = s.ID
		}
		return out
	}
	tests := []struct {
		name string
		q    session.Query
		want []string
	}{
		{"metadata", session.Query{Tenant: "acme", Metadata: map[string]string{"user": "alice"}, Limit: 4}, alice[:4]},
		{"metadata, next page", session.Query{Tenant: "acme", Metadata: map[string]string{"user": "alice"}, Limit: 4,
			After: &session.Cursor{CreatedAt: base.Add(150 * time.Second), ID: alice[2]}}, alice[3:]},
		{"state", session.Query{Tenant: "acme", Agent: "helper", State: session.StateRunning}, running},
		{"tenant page", session.Query{Tenant: "acme", Limit: 10, After: &session.Cursor{CreatedAt: base.Add(100 * time.Second), ID: "s100"}},
			[]string{"s099", "s098", "s097", "s096", "s095", "s094", "s093", "s092", "s091", "s090"}},
		{"created between", session.Query{Tenant: "acme", CreatedAfter: base.Add(10 * time.Second), CreatedBefore: base.Add(13 * time.Second)},
			[]string{"s012", "s011"}},
		{"created between, to the nanosecond", session.Query{Tenant: "acme", CreatedAfter: base.Add(10*time.Second - time.Nanosecond),
			CreatedBefore: base.Add(13*time.Second + time.Nanosecond)}, []string{"s013", "s012", "s011", "s010"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loads.n.Store(0)
			got, err := st.ListSessions(ctx, tt.q)
			require.NoError(t, err)
			assert.Equal(t, tt.want, ids(got))
			assert.EqualValues(t, len(tt.want), loads.n.Load(), "sessions loaded")
		})
	}
}
