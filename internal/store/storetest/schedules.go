package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// ScheduleStore is a store that keeps its sessions' schedules.
type ScheduleStore interface {
	kernel.Store
	schedule.Store
}

// RunSchedules runs the conformance suite of schedule.Store against the
// stores open returns, each fresh and closed by a cleanup open registers:
// schedules kept whole, bounded per session and tenant, and claimed by
// one holder at a time.
func RunSchedules(t *testing.T, open func(t *testing.T) ScheduleStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st ScheduleStore)
	}{
		{"create and get keep every field", testScheduleRoundTrip},
		{"list gives a session's schedules, oldest first", testScheduleList},
		{"a missing session or a taken id is refused", testScheduleRefused},
		{"bounds per session and per tenant", testScheduleBounds},
		{"delete removes one schedule", testScheduleDelete},
		{"deleting a session's schedules frees its tenant's room", testScheduleDeleteSession},
		{"claims take due schedules, due first, until they expire", testScheduleClaim},
		{"finishing a firing records it and releases the claim", testScheduleFinish},
		{"a lost claim records nothing", testScheduleClaimLost},
		{"concurrent claims take each schedule once", testScheduleConcurrentClaims},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() { forgetStore(st) })
			tc.fn(t, st)
		})
	}
}

// noBounds are bounds no test reaches.
var noBounds = schedule.Bounds{PerSession: 1000, PerTenant: 1000}

// newSchedule returns a schedule of session s due n seconds after epoch.
func newSchedule(s session.Session, n int, edits ...func(*schedule.Schedule)) schedule.Schedule {
	sch := schedule.Schedule{ID: newID(), Tenant: s.Tenant, SessionID: s.ID, Input: "remind me",
		IfBusy: schedule.IfBusySkip, NextAt: utc(at(n)), CreatedAt: utc(at(0))}
	for _, edit := range edits {
		edit(&sch)
	}
	return sch
}

func mustCreateSchedule(tb testing.TB, st ScheduleStore, sch schedule.Schedule) schedule.Schedule {
	tb.Helper()
	require.NoError(tb, st.CreateSchedule(tb.Context(), sch, noBounds), "create schedule")
	return sch
}

func mustGetSchedule(tb testing.TB, st ScheduleStore, sessionID, id string) schedule.Schedule {
	tb.Helper()
	sch, err := st.GetSchedule(tb.Context(), sessionID, id)
	require.NoError(tb, err, "get schedule %s", id)
	return normSchedule(sch)
}

// normSchedule makes sch comparable with require.Equal across backends.
func normSchedule(sch schedule.Schedule) schedule.Schedule {
	sch.At, sch.NextAt, sch.CreatedAt = utcOrZero(sch.At), utc(sch.NextAt), utc(sch.CreatedAt)
	if sch.Last != nil {
		last := *sch.Last
		last.At, last.DueAt = utc(last.At), utc(last.DueAt)
		sch.Last = &last
	}
	return sch
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return utc(t)
}

func ids(schs []schedule.Schedule) []string {
	out := make([]string, len(schs))
	for i, s := range schs {
		out[i] = s.ID
	}
	return out
}

func mustClaim(tb testing.TB, st ScheduleStore, holder string, now time.Time, limit int) []schedule.Schedule {
	tb.Helper()
	got, err := st.ClaimDue(tb.Context(), holder, now, time.Minute, limit)
	require.NoError(tb, err, "claim due schedules")
	return got
}

func testScheduleRoundTrip(t *testing.T, st ScheduleStore) {
	s := mustCreateSession(t, st)
	once := mustCreateSchedule(t, st, newSchedule(s, 5, func(sch *schedule.Schedule) { sch.At = sch.NextAt }))
	every := mustCreateSchedule(t, st, newSchedule(s, 3600, func(sch *schedule.Schedule) {
		sch.Every, sch.IfBusy, sch.Input = time.Hour, schedule.IfBusyQueue, "stand-up: what did you do? ✓"
	}))
	assert.Equal(t, once, mustGetSchedule(t, st, s.ID, once.ID))
	assert.Equal(t, every, mustGetSchedule(t, st, s.ID, every.ID))
	_, err := st.GetSchedule(t.Context(), s.ID, newID())
	requireNotFound(t, err, "schedule_not_found")
	_, err = st.GetSchedule(t.Context(), mustCreateSession(t, st).ID, once.ID)
	requireNotFound(t, err, "schedule_not_found")
}

func testScheduleList(t *testing.T, st ScheduleStore) {
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	got, err := st.ListSchedules(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Empty(t, got)
	var want []string
	for i := range 3 {
		sch := mustCreateSchedule(t, st, newSchedule(s, 100-i, func(sch *schedule.Schedule) { sch.CreatedAt = utc(at(i)) }))
		want = append(want, sch.ID)
	}
	mustCreateSchedule(t, st, newSchedule(other, 1))
	got, err = st.ListSchedules(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, want, ids(got))
}

func testScheduleRefused(t *testing.T, st ScheduleStore) {
	missing := newSession()
	err := st.CreateSchedule(t.Context(), newSchedule(missing, 1), noBounds)
	requireNotFound(t, err, "session_not_found")
	s := mustCreateSession(t, st)
	sch := mustCreateSchedule(t, st, newSchedule(s, 1))
	err = st.CreateSchedule(t.Context(), sch, noBounds)
	requireErr(t, err, errdefs.ErrConflict, "schedule_exists")
}

func testScheduleBounds(t *testing.T, st ScheduleStore) {
	b := schedule.Bounds{PerSession: 2, PerTenant: 3}
	a, c := mustCreateSession(t, st), mustCreateSession(t, st)
	for range 2 {
		require.NoError(t, st.CreateSchedule(t.Context(), newSchedule(a, 1), b))
	}
	err := st.CreateSchedule(t.Context(), newSchedule(a, 1), b)
	requireErr(t, err, errdefs.ErrExhausted, "schedule_limit")
	last := newSchedule(c, 1)
	require.NoError(t, st.CreateSchedule(t.Context(), last, b))
	err = st.CreateSchedule(t.Context(), newSchedule(c, 1), b)
	requireErr(t, err, errdefs.ErrExhausted, "schedule_limit")
	theirs := mustCreateSession(t, st, func(s *session.Session) { s.Tenant = "globex" })
	require.NoError(t, st.CreateSchedule(t.Context(), newSchedule(theirs, 1), b), "another tenant has room")
	require.NoError(t, st.DeleteSchedule(t.Context(), c.ID, last.ID))
	require.NoError(t, st.CreateSchedule(t.Context(), newSchedule(c, 1), b), "a deleted schedule frees its room")
}

func testScheduleDelete(t *testing.T, st ScheduleStore) {
	s := mustCreateSession(t, st)
	sch, kept := mustCreateSchedule(t, st, newSchedule(s, 1)), mustCreateSchedule(t, st, newSchedule(s, 2))
	require.NoError(t, st.DeleteSchedule(t.Context(), s.ID, sch.ID))
	_, err := st.GetSchedule(t.Context(), s.ID, sch.ID)
	requireNotFound(t, err, "schedule_not_found")
	requireNotFound(t, st.DeleteSchedule(t.Context(), s.ID, sch.ID), "schedule_not_found")
	assert.Equal(t, []string{kept.ID}, ids(mustClaim(t, st, "r1", at(10), 10)), "a deleted schedule never fires")
}

func testScheduleDeleteSession(t *testing.T, st ScheduleStore) {
	b := schedule.Bounds{PerSession: 5, PerTenant: 2}
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	for range 2 {
		require.NoError(t, st.CreateSchedule(t.Context(), newSchedule(s, 1), b))
	}
	require.NoError(t, st.DeleteSession(t.Context(), s.ID))
	forgetLease(st, s.ID)
	require.NoError(t, st.DeleteSessionSchedules(t.Context(), s.ID))
	require.NoError(t, st.DeleteSessionSchedules(t.Context(), s.ID), "twice")
	got, err := st.ListSchedules(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Empty(t, mustClaim(t, st, "r1", at(10), 10))
	for range 2 {
		require.NoError(t, st.CreateSchedule(t.Context(), newSchedule(other, 1), b), "the tenant's room is back")
	}
}

func testScheduleClaim(t *testing.T, st ScheduleStore) {
	s := mustCreateSession(t, st)
	late := mustCreateSchedule(t, st, newSchedule(s, 30))
	early := mustCreateSchedule(t, st, newSchedule(s, 10))
	middle := mustCreateSchedule(t, st, newSchedule(s, 20))
	mustCreateSchedule(t, st, newSchedule(s, 100)) // not due

	assert.Empty(t, mustClaim(t, st, "r1", at(9), 10), "nothing is due yet")
	got := mustClaim(t, st, "r1", at(30), 2)
	require.Equal(t, []string{early.ID, middle.ID}, ids(got), "due first, up to the limit")
	assert.Positive(t, got[0].Claim)
	assert.Equal(t, early.Input, got[0].Input)
	assert.Equal(t, []string{late.ID}, ids(mustClaim(t, st, "r2", at(30), 10)), "claimed ones are taken")
	assert.Empty(t, mustClaim(t, st, "r2", at(30).Add(59*time.Second), 10), "until their claims expire")
	again := mustClaim(t, st, "r2", at(30).Add(time.Minute), 10)
	require.Equal(t, []string{early.ID, middle.ID, late.ID}, ids(again), "expired claims are taken again")
	assert.Greater(t, again[0].Claim, got[0].Claim, "with a newer token")
}

func testScheduleFinish(t *testing.T, st ScheduleStore) {
	s := mustCreateSession(t, st)
	every := mustCreateSchedule(t, st, newSchedule(s, 10, func(sch *schedule.Schedule) { sch.Every = time.Hour }))
	once := mustCreateSchedule(t, st, newSchedule(s, 10))
	got := mustClaim(t, st, "r1", at(10), 10)
	require.Len(t, got, 2)
	for _, sch := range got {
		sch.Fired++
		sch.Last = &schedule.Firing{At: utc(at(11)), DueAt: sch.NextAt, Outcome: schedule.OutcomeStarted, RunID: newID()}
		done := sch.ID == once.ID
		if !done {
			sch.NextAt = utc(at(3610))
		}
		require.NoError(t, st.FinishFiring(t.Context(), sch, done))
		if !done {
			stored := mustGetSchedule(t, st, s.ID, sch.ID)
			assert.Equal(t, int64(1), stored.Fired)
			assert.Equal(t, normSchedule(sch).Last, stored.Last)
			assert.Equal(t, utc(at(3610)), stored.NextAt)
		}
	}
	_, err := st.GetSchedule(t.Context(), s.ID, once.ID)
	requireNotFound(t, err, "schedule_not_found")
	assert.Empty(t, mustClaim(t, st, "r2", at(3609), 10), "released, and not due again yet")
	assert.Equal(t, []string{every.ID}, ids(mustClaim(t, st, "r2", at(3610), 10)))
}

func testScheduleClaimLost(t *testing.T, st ScheduleStore) {
	s := mustCreateSession(t, st)
	mustCreateSchedule(t, st, newSchedule(s, 10, func(sch *schedule.Schedule) { sch.Every = time.Hour }))
	first := mustClaim(t, st, "r1", at(10), 10)[0]
	second := mustClaim(t, st, "r2", at(10).Add(time.Minute), 10)[0] // r1's claim expired
	first.Fired, first.NextAt = 1, utc(at(3610))
	require.ErrorIs(t, st.FinishFiring(t.Context(), first, false), schedule.ErrClaimLost)
	require.ErrorIs(t, st.FinishFiring(t.Context(), first, true), schedule.ErrClaimLost, "nor delete it")
	stored := mustGetSchedule(t, st, s.ID, first.ID)
	assert.Zero(t, stored.Fired)
	second.Fired, second.NextAt = 1, utc(at(3610))
	require.NoError(t, st.FinishFiring(t.Context(), second, false))
	require.NoError(t, st.DeleteSchedule(t.Context(), s.ID, second.ID))
	require.ErrorIs(t, st.FinishFiring(t.Context(), second, false), schedule.ErrClaimLost, "a deleted schedule")
}

func testScheduleConcurrentClaims(t *testing.T, st ScheduleStore) {
	s := mustCreateSession(t, st)
	const n, holders = 24, 6
	for i := range n {
		mustCreateSchedule(t, st, newSchedule(s, i))
	}
	var mu sync.Mutex
	claimed := map[string]string{}
	var wg sync.WaitGroup
	for h := range holders {
		wg.Go(func() {
			holder := fmt.Sprintf("r%d", h)
			for {
				got, err := st.ClaimDue(t.Context(), holder, at(n), time.Minute, 3)
				if !assert.NoError(t, err) || len(got) == 0 {
					return
				}
				mu.Lock()
				for _, sch := range got {
					assert.Empty(t, claimed[sch.ID], "schedule %s claimed twice", sch.ID)
					claimed[sch.ID] = holder
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, claimed, n)
}
