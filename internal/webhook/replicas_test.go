package webhook_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/webhook"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(writeAndWait(dir, os.Getenv(childURLEnv)))
	}
	goleak.VerifyTestMain(m)
}

// TestDispatcher_TwoReplicas runs two dispatchers on one outbox, as two
// replicas of kerneld would: every delivery reaches the receiver once.
func TestDispatcher_TwoReplicas(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		deliverOnceWithTwo(t, func(t *testing.T) (webhook.Outbox, webhook.Outbox) {
			st := memory.New()
			return st, st
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Use(t)
		deliverOnceWithTwo(t, func(t *testing.T) (webhook.Outbox, webhook.Outbox) {
			return openRedis(t, srv), openRedis(t, srv) // two clients, as two processes have
		})
	})
}

func openRedis(t *testing.T, srv redistest.Server) *redis.Store {
	t.Helper()
	st, err := redis.Open(t.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	return st
}

func deliverOnceWithTwo(t *testing.T, open func(t *testing.T) (webhook.Outbox, webhook.Outbox)) {
	a, b := open(t)
	f := newFixture(t, a)
	// Slow answers keep both replicas busy at once.
	f.rcv.SetStatus(func() int { time.Sleep(2 * time.Millisecond); return 204 })
	da := f.dispatcher(t, webhook.DispatcherOptions{Replica: "a", Workers: 3})
	fb := &fixture{rcv: f.rcv, targets: f.targets, outbox: b}
	db := fb.dispatcher(t, webhook.DispatcherOptions{Replica: "b", Workers: 3})
	ds := f.announce(t, da, 60)
	db.Notify()
	for _, d := range ds {
		waitState(t, a, d.ID, webhook.StateDelivered)
	}
	counts, bad := f.rcv.Counts()
	assert.Len(t, counts, len(ds))
	for id, n := range counts {
		assert.Equal(t, 1, n, "delivery %s", id)
	}
	assert.Zero(t, bad)
	assert.Equal(t, int64(len(ds)), da.Stats().Delivered.Load()+db.Stats().Delivered.Load())
	assert.NotZero(t, db.Stats().Delivered.Load(), "both replicas delivered some")
}
