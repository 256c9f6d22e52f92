package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
)

// received collects what a Listener hands over.
type received struct {
	mu      sync.Mutex
	signals []session.Signal
	events  map[string][]int64 // seqs by session
}

func (r *received) signal(sig session.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signals = append(r.signals, sig)
}

func (r *received) deliver(evs []session.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		r.events[ev.SessionID] = append(r.events[ev.SessionID], ev.Seq)
	}
}

func (r *received) seqs(id string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.events[id]...)
}

// startListener runs a listener of st until the test ends.
func startListener(t *testing.T, st *postgres.Store) (*postgres.Listener, *received) {
	r := &received{events: make(map[string][]int64)}
	l := st.NewListener(r.signal, r.deliver)
	done := make(chan error, 1)
	go func() { done <- l.Run(t.Context()) }()
	t.Cleanup(func() {
		require.NoError(t, l.Close())
		require.NoError(t, <-done)
	})
	return l, r
}

// TestListener runs two stores on one schema, as two replicas: a signal
// one publishes reaches both, and the events one appends reach the
// other's tail, gapless, from where the tail began.
func TestListener(t *testing.T) {
	u := pgtest.Schema(t)
	writer, reader := mustOpen(t, u), mustOpen(t, u)
	wl, _ := startListener(t, writer)
	rl, got := startListener(t, reader)

	sess := newSession()
	require.NoError(t, writer.CreateSession(t.Context(), sess))
	token, err := writer.AcquireLease(t.Context(), sess.ID, "writer", time.Minute)
	require.NoError(t, err)
	appendN(t, writer, sess.ID, token, 3)

	rl.Follow(sess.ID, 2)
	defer rl.Unfollow(sess.ID)
	waitSeqs(t, got, sess.ID, []int64{3}) // caught up at once: no append came after the follow
	appendN(t, writer, sess.ID, token, 4)
	waitSeqs(t, got, sess.ID, []int64{3, 4, 5, 6, 7})

	sig := session.Signal{Kind: session.SignalChanged, SessionID: sess.ID, RunID: "r1", From: "writer"}
	require.Eventually(t, func() bool {
		require.NoError(t, wl.Publish(t.Context(), sig))
		got.mu.Lock()
		defer got.mu.Unlock()
		return len(got.signals) > 0
	}, 10*time.Second, 100*time.Millisecond, "the signal reaches the other replica")
	got.mu.Lock()
	assert.Equal(t, sig, got.signals[0])
	got.mu.Unlock()
}

// TestListenerCatchesUpAfterAnOutage cuts the listener's connection while
// events are appended: the notifications are lost, and the listener
// delivers the events once it listens again.
func TestListenerCatchesUpAfterAnOutage(t *testing.T) {
	u := pgtest.Schema(t)
	writer := mustOpen(t, u)
	p := startProxy(t, u)
	reader := mustOpen(t, p.url)
	l, got := startListener(t, reader)
	sess := newSession()
	require.NoError(t, writer.CreateSession(t.Context(), sess))
	token, err := writer.AcquireLease(t.Context(), sess.ID, "writer", time.Minute)
	require.NoError(t, err)
	l.Follow(sess.ID, 0)
	appendN(t, writer, sess.ID, token, 1)
	waitSeqs(t, got, sess.ID, []int64{1})

	p.cut()
	appendN(t, writer, sess.ID, token, 2)
	p.restore(t)
	waitSeqs(t, got, sess.ID, []int64{1, 2, 3})
}

// appendN appends n events to session id under token.
func appendN(t *testing.T, st *postgres.Store, id string, token int64, n int) {
	t.Helper()
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.TextMessageContent("m", "x")
		evs[i].SessionID, evs[i].RunID, evs[i].Time = id, "r1", time.Now()
	}
	require.NoError(t, st.AppendEvents(t.Context(), token, evs))
}

// waitSeqs waits until the seqs delivered for session id are want.
func waitSeqs(t *testing.T, r *received, id string, want []int64) {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.seqs(id)) >= len(want) }, 15*time.Second, 10*time.Millisecond,
		"delivered %v, want %v", r.seqs(id), want)
	assert.Equal(t, want, r.seqs(id))
}
