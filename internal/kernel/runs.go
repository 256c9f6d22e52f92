package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// BusyPolicy says what to do with input posted while a run is active.
type BusyPolicy string

// Busy policies.
const (
	BusyReject    BusyPolicy = "reject"
	BusyQueue     BusyPolicy = "queue"
	BusyInterrupt BusyPolicy = "interrupt"
	BusySteer     BusyPolicy = "steer"
)

// MaxIdempotencyKeyLen bounds an Idempotency-Key.
const MaxIdempotencyKeyLen = 255

// RunRequest is input for a session.
type RunRequest struct {
	Input          string
	IfBusy         BusyPolicy // "" means BusyReject
	IdempotencyKey string
}

// Run accepts input for a session and starts a run: it persists the run
// and the user message, emits RUN_STARTED and the echoed input, and starts
// the agent loop, which outlives ctx. With an Idempotency-Key seen within
// the window it returns the original run instead and replayed is true.
func (k *Kernel) Run(ctx context.Context, sessionID string, req RunRequest) (session.Run, bool, error) {
	if err := k.validateRunRequest(req); err != nil {
		return session.Run{}, false, err
	}
	if err := k.awaitEnding(ctx, sessionID); err != nil {
		return session.Run{}, false, err
	}
	unlock := k.lockSession(sessionID)
	defer unlock()
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return session.Run{}, false, err
	}
	if prev, ok, err := k.findIdempotent(ctx, sessionID, req.IdempotencyKey); err != nil || ok {
		return prev, ok, err
	}
	spec, err := k.runnableAgent(s.Agent)
	if err != nil {
		return session.Run{}, false, err
	}
	ar, run, busy, err := k.reserve(s, req)
	switch {
	case err != nil:
		return session.Run{}, false, err
	case busy != nil:
		run, err := k.whileBusy(ctx, s, busy, req)
		return run, false, err
	}
	return k.launch(ctx, s, spec, ar, run)
}

// launch starts a reserved run and its session's run goroutine.
func (k *Kernel) launch(ctx context.Context, s session.Session, spec agents.Spec, ar *activeRun, run session.Run) (session.Run, bool, error) {
	logged, startErr := k.start(ctx, s, &run)
	if !logged {
		k.abandon(s, &run)
		k.retire(s.ID, ar)
		k.wg.Done()
		return session.Run{}, false, startErr
	}
	k.openWriter(ar, run)
	// Once RUN_STARTED is in the log the run must end there too: a failure
	// after that point is handed to the run, which ends as internal.
	go k.runSession(ar, run, spec, startErr, true)
	return run, false, nil
}

// awaitEnding waits for a session's run that is already emitting its end,
// so input posted the moment RUN_FINISHED arrives starts a run instead of
// finding the session busy.
func (k *Kernel) awaitEnding(ctx context.Context, sessionID string) error {
	k.mu.Lock()
	ar := k.active[sessionID]
	k.mu.Unlock()
	if ar == nil || !ar.ending.Load() {
		return nil
	}
	select {
	case <-ar.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// validateRunRequest checks a run request's shape.
func (k *Kernel) validateRunRequest(req RunRequest) error {
	var v *errdefs.ValidationError
	switch {
	case req.Input == "":
		v = v.Add("input", "required")
	case len(req.Input) > k.limits.MaxInputBytes:
		v = v.Add("input", fmt.Sprintf("longer than %d bytes", k.limits.MaxInputBytes))
	}
	if len(req.IdempotencyKey) > MaxIdempotencyKeyLen {
		v = v.Add("Idempotency-Key", fmt.Sprintf("longer than %d characters", MaxIdempotencyKeyLen))
	}
	if err := v.Err(); err != nil {
		return err
	}
	switch req.IfBusy {
	case "", BusyReject, BusyQueue, BusyInterrupt, BusySteer:
		return nil
	}
	return errdefs.Invalid("if_busy", `must be one of "reject", "queue", "interrupt", "steer"`)
}

// findIdempotent returns the run created with key within the window.
func (k *Kernel) findIdempotent(ctx context.Context, sessionID, key string) (session.Run, bool, error) {
	if key == "" {
		return session.Run{}, false, nil
	}
	since := k.now().Add(-k.limits.IdempotencyWindow)
	r, err := k.store.FindRunByIdempotencyKey(ctx, sessionID, key, since)
	if errors.Is(err, errdefs.ErrNotFound) {
		return session.Run{}, false, nil
	}
	if err != nil {
		return session.Run{}, false, fmt.Errorf("find run by idempotency key: %w", err)
	}
	return r, true, nil
}

// reserve claims session s for a new run and returns the claim and the
// run, or, when s has an active run, returns that run as busy.
func (k *Kernel) reserve(s session.Session, req RunRequest) (ar *activeRun, run session.Run, busy *activeRun, err error) {
	if !s.State.AcceptsRuns() {
		return nil, run, nil, errdefs.New(errdefs.ErrConflict, "session_closed", "session %s is closed", s.ID)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.checkOpenLocked(); err != nil {
		return nil, run, nil, err
	}
	if cur := k.active[s.ID]; cur != nil {
		return nil, run, cur, nil
	}
	now := k.now().UTC()
	run = session.Run{
		ID: session.NewID(), SessionID: s.ID, State: session.RunRunning, Input: req.Input,
		IdempotencyKey: req.IdempotencyKey, CreatedAt: now, StartedAt: now,
	}
	ar = k.newActiveRun(run.ID)
	k.active[s.ID] = ar
	k.wg.Add(1) // under mu, after the closed check, so Close waits for this run
	return ar, run, nil, nil
}

// start records a reserved or queued run as started: the run, the
// session's state, RUN_STARTED with the echoed input, and the user
// message. logged reports whether RUN_STARTED reached the log.
func (k *Kernel) start(ctx context.Context, s session.Session, r *session.Run) (logged bool, err error) {
	if err := k.recordStart(ctx, r); err != nil {
		return false, err
	}
	if err := s.Transition(session.StateRunning, r.StartedAt); err != nil {
		return false, err
	}
	s.ActiveRunID = r.ID
	s.ExpiresAt = time.Time{} // a busy session does not expire; its TTL restarts when it is free

	if err := k.store.UpdateSession(ctx, s); err != nil {
		return false, fmt.Errorf("update session: %w", err)
	}
	msgID := session.NewMessageID()
	evs := []session.Event{
		session.RunStarted(s.ID, r.ID),
		session.TextMessageStart(msgID, session.RoleUser),
		session.TextMessageContent(msgID, r.Input),
		session.TextMessageEnd(msgID),
	}
	if err := k.emit(ctx, s.ID, r.ID, evs...); err != nil {
		return false, err
	}
	r.StartSeq = evs[0].Seq
	if err := k.store.UpdateRun(ctx, *r); err != nil {
		return true, fmt.Errorf("update run: %w", err)
	}
	msg := session.Message{ID: msgID, SessionID: s.ID, RunID: r.ID, Role: session.RoleUser, Content: r.Input, CreatedAt: r.StartedAt}
	if err := k.store.AppendMessages(ctx, msg); err != nil {
		return true, fmt.Errorf("append message: %w", err)
	}
	return true, nil
}

// recordStart stores a new run as running, or moves a queued one to
// running.
func (k *Kernel) recordStart(ctx context.Context, r *session.Run) error {
	if r.State != session.RunQueued {
		if err := k.store.CreateRun(ctx, *r); err != nil {
			return fmt.Errorf("create run: %w", err)
		}
		return nil
	}
	if err := r.Transition(session.RunRunning, k.now()); err != nil {
		return err
	}
	if err := k.store.UpdateRun(ctx, *r); err != nil {
		return fmt.Errorf("update run: %w", err)
	}
	return nil
}

// abandon undoes what start recorded of a run that never reached the log:
// the run is marked failed and the session gets its previous state back.
func (k *Kernel) abandon(prev session.Session, r *session.Run) {
	ctx := context.WithoutCancel(k.ctx)
	r.State, r.EndedAt = session.RunFailed, k.now().UTC()
	r.Error = &session.RunError{Code: session.ErrorCodeInternal, Message: "the run could not be started"}
	if err := k.store.UpdateRun(ctx, *r); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		k.log.Error("abandon run", "session", prev.ID, "run", r.ID, "err", err)
	}
	if err := k.store.UpdateSession(ctx, prev); err != nil {
		k.log.Error("restore session", "session", prev.ID, "err", err)
	}
}

// GetRun returns one run of a session.
func (k *Kernel) GetRun(ctx context.Context, sessionID, runID string) (session.Run, error) {
	if _, err := k.GetSession(ctx, sessionID); err != nil {
		return session.Run{}, err
	}
	notFound := errdefs.New(errdefs.ErrNotFound, "run_not_found", "run %q not found in session %s", runID, sessionID)
	if !validID(runID) {
		return session.Run{}, notFound
	}
	r, err := k.store.GetRun(ctx, sessionID, runID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return session.Run{}, notFound
	}
	if err != nil {
		return session.Run{}, fmt.Errorf("get run: %w", err)
	}
	return r, nil
}

// ListRuns returns a page of a session's runs, newest first.
func (k *Kernel) ListRuns(ctx context.Context, sessionID string, page PageRequest) (Page[session.Run], error) {
	if _, err := k.GetSession(ctx, sessionID); err != nil {
		return Page[session.Run]{}, err
	}
	limit, err := page.size()
	if err != nil {
		return Page[session.Run]{}, err
	}
	before, err := decodeCursor(page.Cursor)
	if err != nil {
		return Page[session.Run]{}, err
	}
	runs, err := k.store.ListRuns(ctx, sessionID, before, limit+1)
	if err != nil {
		return Page[session.Run]{}, fmt.Errorf("list runs: %w", err)
	}
	return paginate(runs, limit, func(r session.Run) string { return r.ID }), nil
}

// CancelRun stops a run and waits until it has recorded its end; the run
// ends cancelled with a valid history. A queued run leaves its queue.
// Cancelling a run that has already ended changes nothing and returns it
// as it is.
func (k *Kernel) CancelRun(ctx context.Context, sessionID, runID string) (session.Run, error) {
	r, err := k.GetRun(ctx, sessionID, runID)
	if err != nil || r.State.Terminal() {
		return r, err
	}
	if r.State != session.RunQueued || !k.cancelQueued(sessionID, runID) {
		if err := k.stopActive(ctx, sessionID, runID, errCancelled); err != nil {
			return session.Run{}, err
		}
	}
	return k.GetRun(ctx, sessionID, runID)
}

// runTimeout returns the agent's run timeout, or a day when unset.
func runTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return 24 * time.Hour
	}
	return d
}
