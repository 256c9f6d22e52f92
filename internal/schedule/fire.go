package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// parallel bounds the firings of one pass that post their runs at once.
const parallel = 4

// FireDue claims the schedules due now and fires them, and returns how
// many it fired. The loop calls it every Poll; tests call it to fire
// without waiting. A firing that cannot be posted now (the kernel is
// shutting down, the store is unavailable) stays claimed, and so is tried
// again, by any replica, once the claim expires.
func (s *Service) FireDue(ctx context.Context) (int, error) {
	now := s.clock()
	due, err := s.store.ClaimDue(ctx, s.holder, now, s.ttl, s.batch)
	if err != nil {
		return 0, fmt.Errorf("claim due schedules: %w", err)
	}
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, parallel)
		mu    sync.Mutex
		fired int
	)
	for _, sch := range due {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if s.fire(ctx, sch, now) {
				mu.Lock()
				fired++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return fired, nil
}

// fire posts sch's run and records the firing; it reports whether the
// firing happened (was recorded, or found its session gone).
func (s *Service) fire(ctx context.Context, sch Schedule, now time.Time) bool {
	// The run must be posted, and the firing recorded, before the claim
	// expires and another replica takes the schedule.
	rctx, cancel := context.WithTimeout(ctx, s.ttl/2)
	defer cancel()
	due := sch.NextAt
	res, err := s.runner.Run(rctx, RunRequest{
		Tenant: sch.Tenant, SessionID: sch.SessionID, Input: sch.Input, IfBusy: busyPolicy(sch.IfBusy),
		Source: session.RunSourceSchedule, IdempotencyKey: FiringKey(sch.ID, due),
	})
	firing := Firing{At: s.clock(), DueAt: due, RunID: res.RunID}
	switch firing.Outcome, firing.Error = outcome(res, err); {
	case firing.Outcome == "":
		s.log.Warn("fire schedule later", "session", sch.SessionID, "schedule", sch.ID, "err", err)
		return false
	case gone(err):
		s.log.Info("schedule of a session gone", "session", sch.SessionID, "schedule", sch.ID, "err", err)
		return s.finish(ctx, sch, true)
	}
	sch.Fired++
	sch.Last = &firing
	sch.NextAt = Next(sch, due, now)
	return s.finish(ctx, sch, sch.NextAt.IsZero())
}

// finish records a firing; done deletes the schedule.
func (s *Service) finish(ctx context.Context, sch Schedule, done bool) bool {
	err := s.store.FinishFiring(context.WithoutCancel(ctx), sch, done)
	switch {
	case isClaimLost(err):
		s.log.Warn("schedule claim lost", "session", sch.SessionID, "schedule", sch.ID)
		return false
	case err != nil:
		s.log.Error("record schedule firing", "session", sch.SessionID, "schedule", sch.ID, "err", err)
		return false
	}
	return true
}

// FiringKey is the idempotency key of the firing of schedule id due at
// due: the same for every replica that may fire it.
func FiringKey(id string, due time.Time) string {
	return "schedule:" + id + ":" + strconv.FormatInt(due.UnixMicro(), 10)
}

// busyPolicy maps a schedule's busy policy to the kernel's.
func busyPolicy(ifBusy string) string {
	if ifBusy == IfBusyQueue {
		return "queue"
	}
	return "reject"
}

// outcome classifies a firing's result. "" means it could not be posted
// now and must be tried again.
func outcome(res RunResult, err error) (string, string) {
	switch {
	case err == nil && res.Queued:
		return OutcomeQueued, ""
	case err == nil:
		return OutcomeStarted, ""
	case errors.Is(err, errdefs.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "", ""
	case errdefs.CodeOf(err) == errdefs.CodeSessionBusy, errors.Is(err, errdefs.ErrExhausted):
		return OutcomeSkipped, err.Error()
	}
	return OutcomeFailed, err.Error()
}

// gone reports whether err says the schedule's session takes no more
// runs: it was deleted or closed.
func gone(err error) bool {
	switch errdefs.CodeOf(err) {
	case errdefs.CodeSessionNotFound, errdefs.CodeSessionClosed:
		return true
	}
	return false
}
