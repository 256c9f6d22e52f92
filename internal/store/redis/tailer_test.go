package redis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// collector gathers the events a tailer delivers, by session, and checks
// that each session's arrive in order without gaps or repeats.
type collector struct {
	t       *testing.T
	mu      sync.Mutex
	got     map[string][]session.Event
	changed chan struct{}
}

func newCollector(t *testing.T) *collector {
	return &collector{t: t, got: make(map[string][]session.Event), changed: make(chan struct{}, 1)}
}

func (c *collector) deliver(evs []session.Event) {
	c.mu.Lock()
	for _, ev := range evs {
		prev := c.got[ev.SessionID]
		if n := len(prev); n > 0 && ev.Seq != prev[n-1].Seq+1 {
			c.t.Errorf("session %s: seq %d delivered after %d", ev.SessionID, ev.Seq, prev[n-1].Seq)
		}
		c.got[ev.SessionID] = append(prev, ev)
	}
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// events returns what was delivered of session id.
func (c *collector) events(id string) []session.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]session.Event(nil), c.got[id]...)
}

// wait waits until cond holds of what was delivered, failing the test
// after timeout.
func (c *collector) wait(timeout time.Duration, what string, cond func(map[string][]session.Event) bool) {
	c.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok := cond(c.got)
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-deadline.C:
			c.t.Fatalf("waited %v for %s", timeout, what)
		}
	}
}

// waitSeq waits until session id's events up to seq were delivered.
func (c *collector) waitSeq(id string, seq int64) {
	c.t.Helper()
	c.wait(10*time.Second, fmt.Sprintf("seq %d of session %s", seq, id), func(got map[string][]session.Event) bool {
		evs := got[id]
		return len(evs) > 0 && evs[len(evs)-1].Seq >= seq
	})
}

// openTailed opens a store whose tailers use conns connections.
func openTailed(tb testing.TB, srv redistest.Server, conns int) *redis.Store {
	tb.Helper()
	st, err := redis.Open(tb.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix, TailConns: conns})
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, st.Close()) })
	return st
}

// runTailer returns a running tailer of st delivering to c, closed when
// the test ends.
func runTailer(t *testing.T, st *redis.Store, deliver func([]session.Event)) *redis.Tailer {
	t.Helper()
	tl, err := st.NewTailer(deliver)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- tl.Run(context.Background()) }()
	t.Cleanup(func() {
		assert.NoError(t, tl.Close())
		assert.NoError(t, <-done, "Run")
	})
	return tl
}

// mustAppend appends n events of writer to session id.
func mustAppend(t *testing.T, st *redis.Store, id, writer string, n int) []session.Event {
	t.Helper()
	evs := tokenEvents(id, writer, n)
	require.NoError(t, appendEvents(t.Context(), st, evs))
	return evs
}

// waitBlocked waits until n connections named name block in a read.
func waitBlocked(t *testing.T, admin *goredis.Client, name string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		ids, err := clientIDs(t.Context(), admin, name, "b")
		return err == nil && len(ids) == n
	}, 10*time.Second, 5*time.Millisecond, "blocked reads of %s", name)
}

func TestTailerFollows(t *testing.T) {
	srv := redistest.Use(t)
	st := openTailed(t, srv, 2)
	c := newCollector(t)
	tl := runTailer(t, st, c.deliver)
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	mustAppend(t, st, a.ID, "a", 3)

	tl.Follow(a.ID, 1)
	tl.Follow(b.ID, 0)
	c.waitSeq(a.ID, 3)
	more := mustAppend(t, st, a.ID, "a", 2)
	fromB := mustAppend(t, st, b.ID, "b", 1)
	c.waitSeq(a.ID, 5)
	c.waitSeq(b.ID, 1)

	got := c.events(a.ID)
	assert.Equal(t, []int64{2, 3, 4, 5}, seqsOf(got), "the tail starts after afterSeq")
	assert.Equal(t, string(more[1].Data), string(got[3].Data))
	assert.Equal(t, more[1].RunID, got[3].RunID)
	assert.Equal(t, more[1].Type, got[3].Type)
	assert.Equal(t, a.ID, got[3].SessionID)
	assert.True(t, more[1].Time.Truncate(time.Microsecond).Equal(got[3].Time), "time %v, want %v", got[3].Time, more[1].Time)
	assert.Equal(t, string(fromB[0].Data), string(c.events(b.ID)[0].Data))
}

func seqsOf(evs []session.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func TestTailerCountsFollows(t *testing.T) {
	srv := redistest.Use(t)
	st := openTailed(t, srv, 1)
	c := newCollector(t)
	tl := runTailer(t, st, c.deliver)
	s, marker := mustCreateSession(t, st), mustCreateSession(t, st)
	tl.Follow(marker.ID, 0)

	tl.Follow(s.ID, 0)
	tl.Follow(s.ID, 0)
	tl.Unfollow(s.ID)
	mustAppend(t, st, s.ID, "s", 1)
	c.waitSeq(s.ID, 1) // one subscriber is left

	tl.Unfollow(s.ID)
	mustAppend(t, st, s.ID, "s", 1)
	mustAppend(t, st, marker.ID, "m", 1)
	c.waitSeq(marker.ID, 1)
	assert.Len(t, c.events(s.ID), 1, "events delivered after the last Unfollow")
	tl.Unfollow(s.ID) // more Unfollows than Follows do nothing
}

// TestTailerWakesBlockedRead follows a second session while the shard's
// read is blocked on the first: its event must arrive long before the
// read would have ended by itself.
func TestTailerWakesBlockedRead(t *testing.T) {
	srv := redistest.Use(t)
	name := srv.Prefix + "tail" // what the tailer names its connections
	st := openTailed(t, srv, 1)
	c := newCollector(t)
	tl := runTailer(t, st, c.deliver)
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	tl.Follow(a.ID, 0)
	mustAppend(t, st, a.ID, "a", 1)
	c.waitSeq(a.ID, 1)
	waitBlocked(t, srv.Client(t), name, 1)

	start := time.Now()
	tl.Follow(b.ID, 0)
	mustAppend(t, st, b.ID, "b", 1)
	c.wait(5*time.Second, "event of the session followed while blocked", func(got map[string][]session.Event) bool {
		return len(got[b.ID]) == 1
	})
	t.Logf("delivered %v after Follow", time.Since(start))
}

func TestTailerReconnects(t *testing.T) {
	srv := redistest.Use(t)
	name := srv.Prefix + "tail" // what the tailer names its connections
	st := openTailed(t, srv, 1)
	c := newCollector(t)
	tl := runTailer(t, st, c.deliver)
	s := mustCreateSession(t, st)
	tl.Follow(s.ID, 0)
	mustAppend(t, st, s.ID, "s", 2)
	c.waitSeq(s.ID, 2)
	admin := srv.Client(t)
	waitBlocked(t, admin, name, 1)

	killClients(t, admin, mustClientIDs(t, admin, name, "b"))
	mustAppend(t, st, s.ID, "s", 3) // while the tail is down
	c.waitSeq(s.ID, 5)
	mustAppend(t, st, s.ID, "s", 1)
	c.waitSeq(s.ID, 6)
	assert.Equal(t, []int64{1, 2, 3, 4, 5, 6}, seqsOf(c.events(s.ID)))
}

func TestTailerManySessions(t *testing.T) {
	const sessions, conns = 1000, 4
	srv := redistest.Use(t)
	name := srv.Prefix + "tail"
	st := openTailed(t, srv, conns)
	c := newCollector(t)
	tl := runTailer(t, st, c.deliver)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = mustCreateSession(t, st).ID
		tl.Follow(ids[i], 0)
	}
	for _, id := range ids {
		mustAppend(t, st, id, "x", 1)
	}
	c.wait(30*time.Second, "an event of every session", func(got map[string][]session.Event) bool {
		return len(got) == sessions
	})
	admin := srv.Client(t)
	waitBlocked(t, admin, name, conns)
	assert.Len(t, mustClientIDs(t, admin, name, ""), conns, "the tailer's connections")
}

func TestTailerClose(t *testing.T) {
	st := openStore(t)
	tl, err := st.NewTailer(func([]session.Event) {})
	require.NoError(t, err)
	tl.Follow(newID(), 0)
	require.NoError(t, tl.Close(), "close without Run")
	assert.Error(t, tl.Run(t.Context()), "Run after Close")
}
