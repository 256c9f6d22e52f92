package storetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// The goroutines these tests start report with t.Errorf and return: only
// the test's own goroutine may stop it.

var concurrencyTests = []test{
	{"parallel appends number every session gaplessly", testConcurrentAppends},
	{"parallel batches stay contiguous", testConcurrentBatches},
	{"readers see a gapless prefix while writers append", testConcurrentReaders},
	{"parallel message appends number positions gaplessly", testConcurrentMessages},
}

// appendSingles appends n single-event batches to session sessionID, each
// a TEXT_MESSAGE_CONTENT with messageId writer and delta i, and checks
// that the seqs it is given increase.
func appendSingles(ctx context.Context, t *testing.T, st kernel.Store, sessionID, writer string, n int) {
	batch := make([]session.Event, 1)
	var last int64
	for i := range n {
		batch[0] = session.TextMessageContent(writer, strconv.Itoa(i))
		batch[0].SessionID, batch[0].RunID, batch[0].Time = sessionID, "run-1", at(i)
		if err := appendEvents(ctx, st, batch); err != nil {
			t.Errorf("writer %s: append %d: %v", writer, i, err)
			return
		}
		if batch[0].Seq <= last {
			t.Errorf("writer %s: seq %d after %d", writer, batch[0].Seq, last)
			return
		}
		last = batch[0].Seq
	}
}

// requireLog requires session sessionID's log to hold seqs 1..n, each
// writer's events in the order it appended them, and LastSeq n.
func requireLog(t *testing.T, st kernel.Store, sessionID string, n int) {
	t.Helper()
	evs := mustReadEvents(t, st, sessionID, 0, 0)
	require.Equal(t, span(1, int64(n)), seqs(evs))
	next := make(map[string]int)
	for _, ev := range evs {
		writer := ev.Member("messageId")
		require.Equal(t, strconv.Itoa(next[writer]), ev.Member("delta"), "next event of writer %s", writer)
		next[writer]++
	}
	assert.EqualValues(t, n, mustGetSession(t, st, sessionID).LastSeq)
}

func testConcurrentAppends(t *testing.T, st kernel.Store) {
	const writers, perWriter, loners = 16, 200, 4
	ctx := t.Context()
	shared := mustCreateSession(t, st)
	own := make([]session.Session, loners)
	for i := range own {
		own[i] = mustCreateSession(t, st)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() { appendSingles(ctx, t, st, shared.ID, fmt.Sprintf("w%d", w), perWriter) })
	}
	for _, s := range own {
		wg.Go(func() { appendSingles(ctx, t, st, s.ID, "own", perWriter) })
	}
	wg.Wait()
	require.False(t, t.Failed(), "appends failed")
	requireLog(t, st, shared.ID, writers*perWriter)
	for _, s := range own {
		requireLog(t, st, s.ID, perWriter)
	}
}

func testConcurrentBatches(t *testing.T, st kernel.Store) {
	const writers, batches, size = 8, 50, 7
	ctx := t.Context()
	s := mustCreateSession(t, st)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range batches {
				evs := newEvents(s.ID, 0, size)
				if err := appendEvents(ctx, st, evs); err != nil {
					t.Errorf("append batch: %v", err)
					return
				}
				if got := seqs(evs); got[size-1]-got[0] != size-1 {
					t.Errorf("batch got seqs %v, want %d consecutive", got, size)
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, span(1, writers*batches*size), seqs(mustReadEvents(t, st, s.ID, 0, 0)))
}

func testConcurrentReaders(t *testing.T, st kernel.Store) {
	const writers, perWriter, readers = 4, 150, 4
	ctx := t.Context()
	s := mustCreateSession(t, st)
	done := make(chan struct{})
	var writes, reads sync.WaitGroup
	for w := range writers {
		writes.Go(func() { appendSingles(ctx, t, st, s.ID, fmt.Sprintf("w%d", w), perWriter) })
	}
	writes.Go(func() { churn(ctx, t, st, s.ID, perWriter) })
	for r := range readers {
		reads.Go(func() { readUntil(ctx, t, st, s.ID, int64(r*10), done) })
	}
	writes.Wait()
	close(done)
	reads.Wait()
	requireLog(t, st, s.ID, writers*perWriter)
}

// readUntil reads session sessionID's log after after until done closes,
// checking that every read is a gapless run of seqs from after+1 and that
// LastSeq never goes back.
func readUntil(ctx context.Context, t *testing.T, st kernel.Store, sessionID string, after int64, done <-chan struct{}) {
	var lastSeq int64
	for {
		select {
		case <-done:
			return
		default:
		}
		evs, err := st.ReadEvents(ctx, sessionID, after, 0)
		if err != nil {
			t.Errorf("read events: %v", err)
			return
		}
		for i, ev := range evs {
			if ev.Seq != after+int64(i)+1 {
				t.Errorf("read after %d: event %d has seq %d", after, i, ev.Seq)
				return
			}
		}
		sess, err := st.GetSession(ctx, sessionID)
		if err != nil || sess.LastSeq < lastSeq {
			t.Errorf("get session: LastSeq %d after %d, err %v", sess.LastSeq, lastSeq, err)
			return
		}
		lastSeq = sess.LastSeq
	}
}

// churn creates sessions, lists them, and writes runs, messages and
// memory of session sessionID, so those paths race with the appends.
func churn(ctx context.Context, t *testing.T, st kernel.Store, sessionID string, n int) {
	for i := range n {
		err := st.CreateSession(ctx, newSession())
		if err == nil {
			_, err = st.ListSessions(ctx, kernel.SessionQuery{Limit: 10})
		}
		if err == nil {
			err = st.CreateRun(ctx, newRun(sessionID), session.RunConstraints{})
		}
		if err == nil {
			err = appendMessages(ctx, st, newMessage(sessionID, strconv.Itoa(i)))
		}
		if err == nil {
			err = st.PutMemory(ctx, newEntry(sessionID, strconv.Itoa(i%10), strconv.Itoa(i)), noLimit)
		}
		if err != nil {
			t.Errorf("churn %d: %v", i, err)
			return
		}
	}
}

func testConcurrentMessages(t *testing.T, st kernel.Store) {
	const writers, perWriter = 8, 25
	ctx := t.Context()
	s := mustCreateSession(t, st)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				pair := []session.Message{newMessage(s.ID, fmt.Sprintf("w%d %d a", w, i)), newMessage(s.ID, fmt.Sprintf("w%d %d b", w, i))}
				if err := appendMessages(ctx, st, pair...); err != nil {
					t.Errorf("append messages: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := mustListMessages(t, st, s.ID, 0, 0)
	require.Equal(t, span(1, writers*perWriter*2), positions(got))
	for i := 0; i < len(got); i += 2 {
		a, b := got[i].Content, got[i+1].Content
		assert.Equal(t, a[:len(a)-1]+"b", b, "the messages of one call stay together")
	}
}
