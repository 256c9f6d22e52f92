package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// Every append is fenced by a lease's token. Tests that are not about
// leases append through appendEvents and appendMessages, which take the
// session's lease on first use and keep its token for the rest of the
// test; the lease tests take and lose leases explicitly.

var leaseTests = []test{
	{"acquire gives a token and refuses a second holder", testLeaseHeld},
	{"acquire, renew and release a missing session", testLeaseMissingSession},
	{"renew extends only the lease held with the token", testLeaseRenew},
	{"release frees the lease for another holder at once", testLeaseRelease},
	{"a lease expires after its ttl", testLeaseExpiry},
	{"tokens increase per session", testLeaseTokensIncrease},
	{"appends carry the token of the live lease", testLeaseFencesAppends},
	{"an append after expiry appends nothing", testLeaseFencedAfterExpiry},
	{"an append after a take-over appends nothing", testLeaseFencedAfterTakeOver},
	{"appends racing a take-over land before it or not at all", testLeaseTakeOverRace},
	{"a missing session is not found before the fence", testLeaseNotFoundFirst},
	{"deleting a session forgets its lease", testLeaseDeleted},
}

// suiteHolder and suiteTTL are the holder and ttl of the leases the suite
// appends under: long enough never to expire during a test.
const (
	suiteHolder = "storetest"
	suiteTTL    = time.Hour
)

// shortTTL is the ttl of the leases the expiry tests wait out, and
// expiryWait how long they wait at most.
const (
	shortTTL   = 50 * time.Millisecond
	expiryWait = 10 * time.Second
)

// setupTTL is the ttl of a lease a test must first append under before
// it waits the lease out: long enough for those appends on a loaded
// machine (a group commit under the race detector can take longer than
// shortTTL), short enough that waiting it out stays quick.
const setupTTL = time.Second

// leaseKey names a session of one store.
type leaseKey struct {
	st kernel.Store
	id string
}

// held caches the tokens of the leases the suite holds, by store and
// session. runGroup and Benchmark forget a store's when its test ends.
var held struct {
	mu     sync.Mutex
	tokens map[leaseKey]int64
}

// tokenOf returns the token of the suite's lease on session id of st,
// acquiring the lease on first use. It is safe for concurrent use, and
// returns an error rather than failing a test, for goroutines.
func tokenOf(ctx context.Context, st kernel.Store, id string) (int64, error) {
	held.mu.Lock()
	defer held.mu.Unlock()
	k := leaseKey{st, id}
	if token, ok := held.tokens[k]; ok {
		return token, nil
	}
	token, err := st.AcquireLease(ctx, id, suiteHolder, suiteTTL)
	if err != nil {
		return 0, fmt.Errorf("acquire lease of session %s: %w", id, err)
	}
	if held.tokens == nil {
		held.tokens = make(map[leaseKey]int64)
	}
	held.tokens[k] = token
	return token, nil
}

// mustToken is tokenOf for a test's own goroutine.
func mustToken(tb testing.TB, st kernel.Store, id string) int64 {
	tb.Helper()
	token, err := tokenOf(tb.Context(), st, id)
	require.NoError(tb, err)
	return token
}

// forgetLease drops the cached token of session id of st, whose lease
// went with the session.
func forgetLease(st kernel.Store, id string) {
	held.mu.Lock()
	delete(held.tokens, leaseKey{st, id})
	held.mu.Unlock()
}

// forgetStore drops every cached token of st.
func forgetStore(st kernel.Store) {
	held.mu.Lock()
	for k := range held.tokens {
		if k.st == st {
			delete(held.tokens, k)
		}
	}
	held.mu.Unlock()
}

// appendEvents appends evs under the suite's lease on their session. A
// lease that cannot be had (the session is missing) is not the append's
// business: then it appends with token 0, and the store answers.
func appendEvents(ctx context.Context, st kernel.Store, evs []session.Event) error {
	var token int64
	if len(evs) > 0 {
		token, _ = tokenOf(ctx, st, evs[0].SessionID)
	}
	return st.AppendEvents(ctx, token, evs)
}

// appendMessages is appendEvents for messages.
func appendMessages(ctx context.Context, st kernel.Store, msgs ...session.Message) error {
	var token int64
	if len(msgs) > 0 {
		token, _ = tokenOf(ctx, st, msgs[0].SessionID)
	}
	return st.AppendMessages(ctx, token, msgs...)
}

// mustAcquire acquires session id's lease for holder with ttl.
func mustAcquire(tb testing.TB, st kernel.Store, id, holder string, ttl time.Duration) int64 {
	tb.Helper()
	token, err := st.AcquireLease(tb.Context(), id, holder, ttl)
	require.NoError(tb, err, "acquire lease of %s for %s", id, holder)
	require.Positive(tb, token, "a lease's token")
	return token
}

// requireFenced fails t unless err is session.ErrFenced.
func requireFenced(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, session.ErrFenced)
	requireErr(t, err, errdefs.ErrUnavailable, "lease_lost")
}

// requireHeld fails t unless err is session.ErrLeaseHeld.
func requireHeld(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, session.ErrLeaseHeld)
	requireErr(t, err, errdefs.ErrConflict, "lease_held")
}

// waitAcquire acquires session id's lease for "replica-b", for a minute,
// as soon as the lease held now expires, polling until expiryWait has
// passed.
func waitAcquire(t *testing.T, st kernel.Store, id string) int64 {
	t.Helper()
	var token int64
	poll(t, "the lease of "+id+" to expire", func() bool {
		var err error
		token, err = st.AcquireLease(t.Context(), id, "replica-b", time.Minute)
		if err != nil {
			requireHeld(t, err)
		}
		return err == nil
	})
	return token
}

// poll calls done every few milliseconds until it returns true, and
// fails t if expiryWait passes first. done runs on t's goroutine.
func poll(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(expiryWait)
	for !done() {
		require.True(t, time.Now().Before(deadline), "waited %v for %s", expiryWait, what)
		time.Sleep(5 * time.Millisecond)
	}
}

func testLeaseHeld(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	token := mustAcquire(t, st, s.ID, "replica-a", time.Minute)
	_, err := st.AcquireLease(ctx, s.ID, "replica-b", time.Minute)
	requireHeld(t, err)
	_, err = st.AcquireLease(ctx, s.ID, "replica-a", time.Minute)
	requireHeld(t, err) // a holder cannot take its own live lease twice
	require.NoError(t, st.RenewLease(ctx, s.ID, token, time.Minute), "the first lease is still held")

	other := mustCreateSession(t, st)
	mustAcquire(t, st, other.ID, "replica-b", time.Minute) // leases are per session
}

func testLeaseMissingSession(t *testing.T, st kernel.Store) {
	ctx, id := t.Context(), newID()
	_, err := st.AcquireLease(ctx, id, "replica-a", time.Minute)
	requireNotFound(t, err, "session_not_found")
	requireNotFound(t, st.RenewLease(ctx, id, 1, time.Minute), "session_not_found")
	require.NoError(t, st.ReleaseLease(ctx, id, 1), "release of a missing session holds nothing")
}

func testLeaseRenew(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	token := mustAcquire(t, st, s.ID, "replica-a", time.Minute)
	require.NoError(t, st.RenewLease(ctx, s.ID, token, time.Minute))
	requireFenced(t, st.RenewLease(ctx, s.ID, token+1, time.Minute))
	requireFenced(t, st.RenewLease(ctx, s.ID, token-1, time.Minute))

	// Renewing to a short ttl makes the lease expire soon after.
	require.NoError(t, st.RenewLease(ctx, s.ID, token, shortTTL))
	next := waitAcquire(t, st, s.ID)
	assert.Greater(t, next, token)
	requireFenced(t, st.RenewLease(ctx, s.ID, token, time.Minute))
}

func testLeaseRelease(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	first := mustAcquire(t, st, s.ID, "replica-a", time.Minute)
	require.NoError(t, st.ReleaseLease(ctx, s.ID, first))
	requireFenced(t, st.RenewLease(ctx, s.ID, first, time.Minute))
	second := mustAcquire(t, st, s.ID, "replica-b", time.Minute)
	assert.Greater(t, second, first)

	// Releasing with an old token leaves the new holder's lease alone.
	require.NoError(t, st.ReleaseLease(ctx, s.ID, first))
	_, err := st.AcquireLease(ctx, s.ID, "replica-c", time.Minute)
	requireHeld(t, err)
	require.NoError(t, st.RenewLease(ctx, s.ID, second, time.Minute))
	require.NoError(t, st.ReleaseLease(ctx, s.ID, second))
	require.NoError(t, st.ReleaseLease(ctx, s.ID, second), "releasing twice")
}

func testLeaseExpiry(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	first := mustAcquire(t, st, s.ID, "replica-a", shortTTL)
	second := waitAcquire(t, st, s.ID)
	assert.Greater(t, second, first)
	requireFenced(t, st.RenewLease(ctx, s.ID, first, time.Minute))
	_, err := st.AcquireLease(ctx, s.ID, "replica-a", time.Minute)
	requireHeld(t, err)
}

func testLeaseTokensIncrease(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	last := map[string]int64{}
	for i := range 5 {
		for _, id := range []string{a.ID, b.ID} {
			token := mustAcquire(t, st, id, fmt.Sprintf("replica-%d", i), time.Minute)
			assert.Greater(t, token, last[id], "token %d of session %s", i, id)
			last[id] = token
			require.NoError(t, st.ReleaseLease(ctx, id, token))
		}
	}
}

func testLeaseFencesAppends(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	token := mustAcquire(t, st, s.ID, "replica-a", time.Minute)
	require.NoError(t, st.AppendEvents(ctx, token, newEvents(s.ID, 0, 2)))
	require.NoError(t, st.AppendMessages(ctx, token, newMessage(s.ID, "kept")))

	for _, wrong := range []int64{0, token - 1, token + 1} {
		evs := newEvents(s.ID, 2, 1)
		requireFenced(t, st.AppendEvents(ctx, wrong, evs))
		assert.Zero(t, evs[0].Seq, "seq of a fenced event")
		msg := newMessage(s.ID, "fenced")
		requireFenced(t, st.AppendMessages(ctx, wrong, msg))
	}
	requireLogged(t, st, s.ID, 2, 1)

	// Without any lease, nothing is appended.
	require.NoError(t, st.ReleaseLease(ctx, s.ID, token))
	requireFenced(t, st.AppendEvents(ctx, token, newEvents(s.ID, 2, 1)))
	requireFenced(t, st.AppendMessages(ctx, token, newMessage(s.ID, "fenced")))
	requireLogged(t, st, s.ID, 2, 1)
}

// requireLogged requires session id to hold exactly events seqs 1..events
// and messages positions 1..msgs, with LastSeq events.
func requireLogged(t *testing.T, st kernel.Store, id string, events, msgs int) {
	t.Helper()
	assert.Equal(t, span(1, int64(events)), seqs(mustReadEvents(t, st, id, 0, 0)), "the session's events")
	assert.EqualValues(t, events, mustGetSession(t, st, id).LastSeq, "the session's LastSeq")
	assert.Equal(t, span(1, int64(msgs)), positions(mustListMessages(t, st, id, 0, 0)), "the session's messages")
}

func testLeaseFencedAfterExpiry(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	token := mustAcquire(t, st, s.ID, "replica-a", shortTTL)
	// Append until the lease expires under the appender: every append
	// before is kept, the first after and every later one is refused.
	appended := 0
	poll(t, "the lease to expire", func() bool {
		err := st.AppendEvents(ctx, token, newEvents(s.ID, appended, 1))
		if errors.Is(err, session.ErrFenced) {
			return true
		}
		require.NoError(t, err, "append under a live lease")
		appended++
		return false
	})
	requireFenced(t, st.AppendEvents(ctx, token, newEvents(s.ID, appended, 3)))
	requireFenced(t, st.AppendMessages(ctx, token, newMessage(s.ID, "late")))
	requireFenced(t, st.RenewLease(ctx, s.ID, token, time.Minute))
	requireLogged(t, st, s.ID, appended, 0)

	next := mustAcquire(t, st, s.ID, "replica-b", time.Minute)
	assert.Greater(t, next, token)
	require.NoError(t, st.AppendEvents(ctx, next, newEvents(s.ID, appended, 1)))
	requireLogged(t, st, s.ID, appended+1, 0)
}

func testLeaseFencedAfterTakeOver(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	old := mustAcquire(t, st, s.ID, "replica-a", setupTTL)
	require.NoError(t, st.AppendEvents(ctx, old, newEvents(s.ID, 0, 1)))
	require.NoError(t, st.AppendMessages(ctx, old, newMessage(s.ID, "first")))

	next := waitAcquire(t, st, s.ID)
	evs := newEvents(s.ID, 1, 2)
	requireFenced(t, st.AppendEvents(ctx, old, evs))
	assert.Equal(t, []int64{0, 0}, seqs(evs), "seqs of a fenced batch")
	requireFenced(t, st.AppendMessages(ctx, old, newMessage(s.ID, "late")))
	requireFenced(t, st.RenewLease(ctx, s.ID, old, time.Minute))
	requireLogged(t, st, s.ID, 1, 1)

	require.NoError(t, st.AppendEvents(ctx, next, evs))
	assert.Equal(t, []int64{2, 3}, seqs(evs), "the new holder continues the log")
	msg := newMessage(s.ID, "second")
	require.NoError(t, st.AppendMessages(ctx, next, msg))
	requireLogged(t, st, s.ID, 3, 2)
}

func testLeaseNotFoundFirst(t *testing.T, st kernel.Store) {
	ctx, id := t.Context(), newID()
	s := mustCreateSession(t, st)
	token := mustAcquire(t, st, s.ID, "replica-a", time.Minute)
	// The token of another session's live lease does not make a missing
	// session fenced: it is not found, whatever the token.
	for _, tok := range []int64{0, token} {
		requireNotFound(t, st.AppendEvents(ctx, tok, newEvents(id, 0, 1)), "session_not_found")
		requireNotFound(t, st.AppendMessages(ctx, tok, newMessage(id, "hi")), "session_not_found")
	}
}

func testLeaseDeleted(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	old := mustAcquire(t, st, s.ID, "replica-a", time.Minute)
	require.NoError(t, st.AppendEvents(ctx, old, newEvents(s.ID, 0, 2)))
	require.NoError(t, st.DeleteSession(ctx, s.ID))

	requireNotFound(t, st.RenewLease(ctx, s.ID, old, time.Minute), "session_not_found")
	require.NoError(t, st.ReleaseLease(ctx, s.ID, old))
	requireNotFound(t, st.AppendEvents(ctx, old, newEvents(s.ID, 2, 1)), "session_not_found")

	// Created again, the session has no lease: one is had at once, and its
	// token is greater than the deleted session's.
	require.NoError(t, st.CreateSession(ctx, s))
	requireFenced(t, st.AppendEvents(ctx, old, newEvents(s.ID, 0, 1)))
	next := mustAcquire(t, st, s.ID, "replica-b", time.Minute)
	assert.Greater(t, next, old)
	requireFenced(t, st.AppendEvents(ctx, old, newEvents(s.ID, 0, 1)))
	require.NoError(t, st.AppendEvents(ctx, next, newEvents(s.ID, 0, 1)))
	requireLogged(t, st, s.ID, 1, 0)
}

// testLeaseTakeOverRace has replica a append under a short lease that it
// never renews while replica b waits to take the session over. Once b
// holds the lease, no append of a may land: the log holds a's accepted
// appends, then b's, and nothing a was refused.
func testLeaseTakeOverRace(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	a := mustAcquire(t, st, s.ID, "replica-a", shortTTL)
	var accepted int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev := session.TextMessageContent("a", "token")
			ev.SessionID, ev.Time = s.ID, at(0)
			err := st.AppendEvents(ctx, a, []session.Event{ev})
			if err != nil {
				if !errors.Is(err, session.ErrFenced) {
					t.Errorf("replica a: %v", err)
				}
				return
			}
			accepted++
		}
	}()
	b := waitAcquire(t, st, s.ID)
	evs := make([]session.Event, 5)
	for i := range evs {
		evs[i] = session.TextMessageContent("b", "token")
		evs[i].SessionID, evs[i].Time = s.ID, at(1)
	}
	require.NoError(t, st.AppendEvents(ctx, b, evs))
	<-done

	got := mustReadEvents(t, st, s.ID, 0, 0)
	require.Len(t, got, accepted+5)
	for i, ev := range got {
		want := "a"
		if i >= accepted {
			want = "b"
		}
		require.Equal(t, want, ev.Member("messageId"), "writer of seq %d", ev.Seq)
	}
	t.Logf("replica a appended %d events before it was fenced", accepted)
}
