// Package outboxtest is the conformance suite for webhook.Outbox: every
// store that keeps webhook deliveries runs Run from its own tests, so the
// dispatcher can rely on one behaviour whichever store is configured.
//
// It exercises a store through webhook.Outbox only, and must not be
// imported outside tests. Times carry microseconds in a zone other than
// UTC; a store must return them Equal.
package outboxtest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/webhook"
)

// Run runs the suite. open returns a fresh, empty outbox for one test
// and closes it with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) webhook.Outbox) {
	tests := []struct {
		name string
		fn   func(t *testing.T, o webhook.Outbox)
	}{
		{"add and get", testAddGet},
		{"add is idempotent", testAddIdempotent},
		{"get is tenant-scoped", testGetTenant},
		{"claim takes what is due, earliest first", testClaimDue},
		{"a claim holds until it expires", testClaimHolds},
		{"finish records the outcome", testFinish},
		{"finish with a lost claim changes nothing", testFinishLost},
		{"list by tenant and state, newest first, in pages", testList},
		{"redeliver", testRedeliver},
		{"prune", testPrune},
		{"concurrent claims never share a delivery", testConcurrentClaims},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// epoch is the base of every fixture time.
var epoch = time.Date(2030, 6, 1, 12, 0, 0, 123456000, time.FixedZone("UTC+2", 2*60*60))

func at(sec int) time.Time { return epoch.Add(time.Duration(sec) * time.Second) }

// delivery returns a pending delivery due at due.
func delivery(tenant, id string, created, due time.Time) webhook.Delivery {
	return webhook.Delivery{
		ID: id, Tenant: tenant, SessionID: "s-" + id, Type: webhook.RunFinished, URL: "https://hooks.example.com/" + id,
		KeyID: "key_0123456789abcdef", Body: []byte(`{"type":"run.finished","data":{"id":"` + id + `"}}`),
		State: webhook.StatePending, CreatedAt: created, ScheduledAt: created, NextAt: due,
	}
}

// assertSame checks that got is want as stored (Claim aside).
func assertSame(t *testing.T, want, got webhook.Delivery) {
	t.Helper()
	assert.Equal(t, want.ID, got.ID)
	assert.Equal(t, want.Tenant, got.Tenant)
	assert.Equal(t, want.SessionID, got.SessionID)
	assert.Equal(t, want.Type, got.Type)
	assert.Equal(t, want.URL, got.URL)
	assert.Equal(t, want.KeyID, got.KeyID)
	assert.Equal(t, string(want.Body), string(got.Body))
	assert.Equal(t, want.State, got.State)
	assert.Equal(t, want.Attempts, got.Attempts)
	assert.Equal(t, want.LastStatus, got.LastStatus)
	assert.Equal(t, want.LastError, got.LastError)
	for _, tt := range []struct {
		name      string
		want, got time.Time
	}{
		{"CreatedAt", want.CreatedAt, got.CreatedAt}, {"ScheduledAt", want.ScheduledAt, got.ScheduledAt},
		{"NextAt", want.NextAt, got.NextAt}, {"LastAttemptAt", want.LastAttemptAt, got.LastAttemptAt},
	} {
		assert.True(t, tt.want.Equal(tt.got), "%s = %v, want %v", tt.name, tt.got, tt.want)
	}
}

func ids(ds []webhook.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func testAddGet(t *testing.T, o webhook.Outbox) {
	d := delivery("acme", "msg_a", at(0), at(0))
	require.NoError(t, o.AddDeliveries(t.Context(), d))
	got, err := o.GetDelivery(t.Context(), "acme", "msg_a")
	require.NoError(t, err)
	assertSame(t, d, got)
	assert.Empty(t, got.Claim)
	_, err = o.GetDelivery(t.Context(), "acme", "msg_missing")
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
}

func testAddIdempotent(t *testing.T, o webhook.Outbox) {
	d := delivery("acme", "msg_a", at(0), at(0))
	require.NoError(t, o.AddDeliveries(t.Context(), d))
	again := d
	again.Body, again.URL = []byte(`{"other":true}`), "https://elsewhere.example.com/"
	require.NoError(t, o.AddDeliveries(t.Context(), again, delivery("acme", "msg_b", at(1), at(1))))
	got, err := o.GetDelivery(t.Context(), "acme", "msg_a")
	require.NoError(t, err)
	assertSame(t, d, got)
	all, err := o.ListDeliveries(t.Context(), webhook.Query{Tenant: "acme"})
	require.NoError(t, err)
	assert.Equal(t, []string{"msg_b", "msg_a"}, ids(all))
}

func testGetTenant(t *testing.T, o webhook.Outbox) {
	require.NoError(t, o.AddDeliveries(t.Context(), delivery("acme", "msg_a", at(0), at(0))))
	_, err := o.GetDelivery(t.Context(), "globex", "msg_a")
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
	_, err = o.RedeliverDelivery(t.Context(), "globex", "msg_a", at(1))
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
	list, err := o.ListDeliveries(t.Context(), webhook.Query{Tenant: "globex"})
	require.NoError(t, err)
	assert.Empty(t, list)
}

func testClaimDue(t *testing.T, o webhook.Outbox) {
	require.NoError(t, o.AddDeliveries(t.Context(),
		delivery("acme", "msg_late", at(0), at(30)), delivery("acme", "msg_second", at(0), at(5)),
		delivery("globex", "msg_first", at(0), at(2)), delivery("acme", "msg_third", at(0), at(9))))
	got, err := o.ClaimDeliveries(t.Context(), "claim-1", at(10), time.Minute, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"msg_first", "msg_second"}, ids(got), "earliest due first, any tenant, at most limit")
	for _, d := range got {
		assert.Equal(t, "claim-1", d.Claim)
	}
	got, err = o.ClaimDeliveries(t.Context(), "claim-2", at(10), time.Minute, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"msg_third"}, ids(got), "claimed ones and ones not yet due are left")
	assertSame(t, delivery("acme", "msg_third", at(0), at(9)), got[0])
}

func testClaimHolds(t *testing.T, o webhook.Outbox) {
	require.NoError(t, o.AddDeliveries(t.Context(), delivery("acme", "msg_a", at(0), at(0))))
	first, err := o.ClaimDeliveries(t.Context(), "claim-1", at(1), 10*time.Second, 5)
	require.NoError(t, err)
	require.Len(t, first, 1)
	none, err := o.ClaimDeliveries(t.Context(), "claim-2", at(10), 10*time.Second, 5)
	require.NoError(t, err)
	assert.Empty(t, none, "the claim holds until at(11)")
	again, err := o.ClaimDeliveries(t.Context(), "claim-3", at(11), 10*time.Second, 5)
	require.NoError(t, err)
	require.Len(t, again, 1, "an expired claim frees the delivery")
	assert.Equal(t, "claim-3", again[0].Claim)
}

func testFinish(t *testing.T, o webhook.Outbox) {
	require.NoError(t, o.AddDeliveries(t.Context(), delivery("acme", "msg_retry", at(0), at(0)),
		delivery("acme", "msg_ok", at(0), at(0)), delivery("acme", "msg_dead", at(0), at(0))))
	claimed, err := o.ClaimDeliveries(t.Context(), "c", at(1), time.Minute, 3)
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	for _, d := range claimed {
		d.Attempts, d.LastAttemptAt = 1, at(2)
		switch d.ID {
		case "msg_retry":
			d.NextAt, d.LastStatus, d.LastError = at(20), 500, "the receiver answered 500"
		case "msg_ok":
			d.State, d.LastStatus = webhook.StateDelivered, 204
		case "msg_dead":
			d.State, d.LastError = webhook.StateFailed, "send: connection refused"
		}
		require.NoError(t, o.FinishAttempt(t.Context(), d))
	}
	retry, err := o.GetDelivery(t.Context(), "acme", "msg_retry")
	require.NoError(t, err)
	want := delivery("acme", "msg_retry", at(0), at(20))
	want.Attempts, want.LastAttemptAt, want.LastStatus, want.LastError = 1, at(2), 500, "the receiver answered 500"
	assertSame(t, want, retry)

	none, err := o.ClaimDeliveries(t.Context(), "c2", at(19), time.Minute, 5)
	require.NoError(t, err)
	assert.Empty(t, none, "the retry is not due before its NextAt; finished ones never are")
	due, err := o.ClaimDeliveries(t.Context(), "c3", at(20), time.Minute, 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"msg_retry"}, ids(due), "finishing released the claim")

	ok, err := o.GetDelivery(t.Context(), "acme", "msg_ok")
	require.NoError(t, err)
	assert.Equal(t, webhook.StateDelivered, ok.State)
	assert.Equal(t, 204, ok.LastStatus)
}

func testFinishLost(t *testing.T, o webhook.Outbox) {
	require.NoError(t, o.AddDeliveries(t.Context(), delivery("acme", "msg_a", at(0), at(0))))
	old, err := o.ClaimDeliveries(t.Context(), "old", at(1), time.Second, 1)
	require.NoError(t, err)
	require.Len(t, old, 1)
	taken, err := o.ClaimDeliveries(t.Context(), "new", at(5), time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, taken, 1)

	late := old[0]
	late.State, late.Attempts, late.LastAttemptAt = webhook.StateDelivered, 1, at(6)
	assert.ErrorIs(t, o.FinishAttempt(t.Context(), late), webhook.ErrClaimLost)
	got, err := o.GetDelivery(t.Context(), "acme", "msg_a")
	require.NoError(t, err)
	assert.Equal(t, webhook.StatePending, got.State, "the stale claim's outcome is not stored")

	unclaimed := got
	unclaimed.State = webhook.StateDelivered
	assert.ErrorIs(t, o.FinishAttempt(t.Context(), unclaimed), webhook.ErrClaimLost, "no claim, no finish")
	taken[0].State, taken[0].Attempts, taken[0].LastAttemptAt = webhook.StateDelivered, 1, at(6)
	require.NoError(t, o.FinishAttempt(t.Context(), taken[0]))
	assert.ErrorIs(t, o.FinishAttempt(t.Context(), taken[0]), webhook.ErrClaimLost, "a claim finishes once")
}

func testList(t *testing.T, o webhook.Outbox) {
	var all []webhook.Delivery
	for i := range 7 {
		all = append(all, delivery("acme", fmt.Sprintf("msg_%d", i), at(i/2), at(100))) // pairs share a CreatedAt
	}
	all = append(all, delivery("globex", "msg_other", at(3), at(100)))
	require.NoError(t, o.AddDeliveries(t.Context(), all...))
	claimed, err := o.ClaimDeliveries(t.Context(), "c", at(100), time.Minute, 10)
	require.NoError(t, err)
	for _, d := range claimed {
		if d.ID == "msg_2" || d.ID == "msg_5" {
			d.State, d.Attempts, d.LastAttemptAt = webhook.StateFailed, 3, at(101)
			require.NoError(t, o.FinishAttempt(t.Context(), d))
		}
	}

	var pages [][]string
	q := webhook.Query{Tenant: "acme", Limit: 3}
	for {
		page, err := o.ListDeliveries(t.Context(), q)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		pages = append(pages, ids(page))
		last := page[len(page)-1]
		q.After = &webhook.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	assert.Equal(t, [][]string{{"msg_6", "msg_5", "msg_4"}, {"msg_3", "msg_2", "msg_1"}, {"msg_0"}}, pages)

	dead, err := o.ListDeliveries(t.Context(), webhook.Query{Tenant: "acme", State: webhook.StateFailed})
	require.NoError(t, err)
	assert.Equal(t, []string{"msg_5", "msg_2"}, ids(dead))
	assert.Empty(t, dead[0].Claim)
	pending, err := o.ListDeliveries(t.Context(), webhook.Query{Tenant: "acme", State: webhook.StatePending, Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []string{"msg_6", "msg_4"}, ids(pending))
}

func testRedeliver(t *testing.T, o webhook.Outbox) {
	require.NoError(t, o.AddDeliveries(t.Context(), delivery("acme", "msg_a", at(0), at(0))))
	_, err := o.RedeliverDelivery(t.Context(), "acme", "msg_a", at(1))
	assert.ErrorIs(t, err, errdefs.ErrConflict, "a pending delivery is still being retried")
	claimed, err := o.ClaimDeliveries(t.Context(), "c", at(1), time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	d := claimed[0]
	d.State, d.Attempts, d.LastAttemptAt, d.LastStatus, d.LastError = webhook.StateFailed, 9, at(50), 500, "the receiver answered 500"
	require.NoError(t, o.FinishAttempt(t.Context(), d))

	got, err := o.RedeliverDelivery(t.Context(), "acme", "msg_a", at(60))
	require.NoError(t, err)
	want := delivery("acme", "msg_a", at(0), at(60))
	want.ScheduledAt, want.LastAttemptAt, want.LastStatus, want.LastError = at(60), at(50), 500, "the receiver answered 500"
	assertSame(t, want, got)
	again, err := o.ClaimDeliveries(t.Context(), "c2", at(60), time.Minute, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"msg_a"}, ids(again), "a redelivered delivery is due at once")
	failed, err := o.ListDeliveries(t.Context(), webhook.Query{Tenant: "acme", State: webhook.StateFailed})
	require.NoError(t, err)
	assert.Empty(t, failed)
}

func testPrune(t *testing.T, o webhook.Outbox) {
	require.NoError(t, o.AddDeliveries(t.Context(), delivery("acme", "msg_old", at(0), at(0)),
		delivery("acme", "msg_new", at(0), at(0)), delivery("acme", "msg_pending", at(0), at(1000))))
	claimed, err := o.ClaimDeliveries(t.Context(), "c", at(1), time.Minute, 5)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	for _, d := range claimed {
		d.State, d.Attempts, d.LastAttemptAt = webhook.StateDelivered, 1, at(10)
		if d.ID == "msg_new" {
			d.State, d.LastAttemptAt = webhook.StateFailed, at(100)
		}
		require.NoError(t, o.FinishAttempt(t.Context(), d))
	}
	n, err := o.PruneDeliveries(t.Context(), at(50))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	left, err := o.ListDeliveries(t.Context(), webhook.Query{Tenant: "acme"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"msg_new", "msg_pending"}, ids(left))
}

func testConcurrentClaims(t *testing.T, o webhook.Outbox) {
	const n, claimers = 60, 6
	var ds []webhook.Delivery
	for i := range n {
		ds = append(ds, delivery("acme", fmt.Sprintf("msg_%02d", i), at(0), at(i%7)))
	}
	require.NoError(t, o.AddDeliveries(t.Context(), ds...))
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Go(func() {
			for {
				claimed, err := o.ClaimDeliveries(t.Context(), fmt.Sprintf("claimer-%d", c), at(10), time.Minute, 4)
				if !assert.NoError(t, err) || len(claimed) == 0 {
					return
				}
				mu.Lock()
				got = append(got, ids(claimed)...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	assert.Equal(t, ids(ds), got, "every delivery claimed exactly once")
}
