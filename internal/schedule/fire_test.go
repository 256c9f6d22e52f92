package schedule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

// TestService_Outcomes: what a firing records when the kernel refuses its
// run, and when it cannot take it now.
func TestService_Outcomes(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		outcome string // "" : not recorded, tried again
		gone    bool   // the schedule is deleted
	}{
		{"busy", errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionBusy, "session is busy"), schedule.OutcomeSkipped, false},
		{"queue full", errdefs.New(errdefs.ErrExhausted, errdefs.CodeQueueFull, "queue is full"), schedule.OutcomeSkipped, false},
		{"agent gone", errdefs.New(errdefs.ErrNotFound, errdefs.CodeAgentNotFound, "agent gone"), schedule.OutcomeFailed, false},
		{"session deleted", errdefs.New(errdefs.ErrNotFound, errdefs.CodeSessionNotFound, "no session"), "", true},
		{"session closed", errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionClosed, "closed"), "", true},
		{"shutting down", errdefs.New(errdefs.ErrUnavailable, errdefs.CodeShuttingDown, "later"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, memory.New())
			svc := f.service(t, "r1", schedule.Limits{})
			sch, err := svc.Create(t.Context(), f.sess, schedule.Spec{Every: time.Hour, Input: "hi"})
			require.NoError(t, err)
			f.runner.SetFail(f.sess.ID, tt.err)
			f.clock.Advance(time.Hour)
			mustFire(t, svc)

			got, err := svc.Get(t.Context(), f.sess.ID, sch.ID)
			if tt.gone {
				assert.Equal(t, "schedule_not_found", string(errdefs.CodeOf(err)))
				return
			}
			require.NoError(t, err)
			if tt.outcome == "" {
				assert.Nil(t, got.Last, "not recorded")
				assert.Equal(t, sch.NextAt, got.NextAt)
				return
			}
			require.NotNil(t, got.Last)
			assert.Equal(t, tt.outcome, got.Last.Outcome)
			assert.Equal(t, tt.err.Error(), got.Last.Error)
			assert.Equal(t, sch.NextAt.Add(time.Hour), got.NextAt)
		})
	}
}

// TestService_RetriedAfterClaimExpires: a firing the kernel could not take
// is tried again once its claim expires, by any replica, under the same
// idempotency key.
func TestService_RetriedAfterClaimExpires(t *testing.T) {
	f := newFixture(t, memory.New())
	r1, r2 := f.service(t, "r1", schedule.Limits{}), f.service(t, "r2", schedule.Limits{})
	at := f.clock.Now().Add(time.Minute)
	_, err := r1.Create(t.Context(), f.sess, schedule.Spec{At: at, Input: "hi"})
	require.NoError(t, err)
	f.runner.SetFail(f.sess.ID, errdefs.New(errdefs.ErrUnavailable, errdefs.CodeShuttingDown, "later"))
	f.clock.Set(at)
	assert.Zero(t, mustFire(t, r1))
	f.runner.SetFail(f.sess.ID, nil)
	assert.Zero(t, mustFire(t, r2), "still claimed by r1")
	f.clock.Advance(30 * time.Second)
	assert.Equal(t, 1, mustFire(t, r2))
	calls := f.runner.Requests()
	require.Len(t, calls, 2)
	assert.Equal(t, calls[0].IdempotencyKey, calls[1].IdempotencyKey)
}

// TestService_LostClaim: a replica that took longer than its claim finds
// another replica fired the schedule; both asked for the same run, which
// the kernel started once, and only the later claim's firing is recorded.
func TestService_LostClaim(t *testing.T) {
	stores(t, func(t *testing.T, st storetest.ScheduleStore) {
		f := newFixture(t, st)
		slow, fast := f.service(t, "slow", schedule.Limits{}), f.service(t, "fast", schedule.Limits{})
		sch, err := slow.Create(t.Context(), f.sess, schedule.Spec{Every: time.Hour, Input: "hi"})
		require.NoError(t, err)
		f.clock.Advance(time.Hour)

		gate := make(chan struct{})
		f.runner.SetGate(gate)
		done := make(chan int)
		go func() {
			n, _ := slow.FireDue(t.Context())
			done <- n
		}()
		<-f.runner.Entered // slow has claimed the schedule and waits in Run
		f.runner.SetGate(nil)
		f.clock.Advance(31 * time.Second) // slow's claim expires
		assert.Equal(t, 1, mustFire(t, fast))
		close(gate)
		assert.Zero(t, <-done, "slow's firing is not recorded")

		assert.Equal(t, 1, f.runner.Started(), "one run")
		got, err := slow.Get(t.Context(), f.sess.ID, sch.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(1), got.Fired)
	})
}

// TestService_Loop: a started Service fires due schedules by itself, and
// forgets the schedules of a session that ended.
func TestService_Loop(t *testing.T) {
	f := newFixture(t, memory.New())
	svc, err := schedule.New(schedule.Options{Store: f.st, Runner: f.runner, Now: f.clock.Now, Poll: 5 * time.Millisecond})
	require.NoError(t, err)
	_, err = svc.Create(t.Context(), f.sess, schedule.Spec{At: f.clock.Now(), Input: "now"})
	require.NoError(t, err)
	other := f.newSession(t, "acme")
	_, err = svc.Create(t.Context(), other, schedule.Spec{Every: time.Hour, Input: "later"})
	require.NoError(t, err)

	svc.Start()
	select {
	case req := <-f.runner.Fired:
		assert.Equal(t, "now", req.Input)
	case <-time.After(10 * time.Second):
		t.Fatal("the loop fired nothing")
	}
	svc.ObserveSessionEnded(other.ID, 0)
	require.Eventually(t, func() bool {
		got, err := svc.List(t.Context(), other.ID)
		return err == nil && len(got) == 0
	}, 10*time.Second, 5*time.Millisecond, "the ended session's schedules go")
	require.NoError(t, svc.Close(t.Context()))
	require.NoError(t, svc.Close(t.Context()), "twice")
}
