package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// The RUN_ERROR messages of runs ended by recovery: one the process died
// under, and one whose events the store stopped taking.
const (
	interruptedMessage = "the run was interrupted: kerneld stopped while it was running"
	storeFailedMessage = "the run was interrupted: the store failed while it was running"
)

// Recover resolves the runs a crash or kill left running, in every session
// no live replica holds. Each is finished from its own events: whatever it
// opened is closed, its dangling tool calls get error results, messages
// the crash kept from the history are recorded, and it ends with RUN_ERROR
// code interrupted; its session goes to error and accepts new runs. Runs
// waiting for approvals wait again, and queued runs start again in order.
// Call it once at startup, before serving: the interrupted runs are
// resolved before it returns. It returns how many runs it resolved.
func (k *Kernel) Recover(ctx context.Context) (int, error) {
	runs, err := k.store.ListRunsByState(ctx, session.RunRunning)
	if err != nil {
		return 0, fmt.Errorf("list running runs: %w", err)
	}
	var ids []string
	for _, r := range runs {
		if !slices.Contains(ids, r.SessionID) {
			ids = append(ids, r.SessionID)
		}
	}
	n := 0
	for _, id := range ids {
		got, err := k.recoverSession(ctx, id)
		n += got
		if err != nil {
			return n, err
		}
	}
	if err := k.takeOverAll(ctx); err != nil { // sessions with waiting or queued runs only
		return n, err
	}
	return n, k.freeSessions(ctx)
}

// freeSessions frees the sessions whose record says they are busy though
// no run of theirs is unfinished, and no replica holds them.
func (k *Kernel) freeSessions(ctx context.Context) error {
	for _, state := range []session.State{session.StateRunning, session.StateWaitingInput} {
		stuck, err := k.store.ListSessions(ctx, SessionQuery{State: state})
		if err != nil {
			return fmt.Errorf("list %s sessions: %w", state, err)
		}
		for _, s := range stuck {
			if k.owner.get(s.ID) != nil {
				continue
			}
			if err := k.freeSession(ctx, s.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// recoverSession takes session id, when no live replica holds it, resolves
// the runs it has left running, and hands it to a driver, which resumes
// its waiting run and starts its queued ones.
func (k *Kernel) recoverSession(ctx context.Context, id string) (int, error) {
	unlock := k.lockSession(id)
	h, fresh, err := k.owner.hold(ctx, id)
	unlock()
	switch {
	case errors.Is(err, session.ErrLeaseHeld), errors.Is(err, errdefs.ErrNotFound), err == nil && !fresh:
		return 0, nil
	case err != nil:
		return 0, err
	}
	n, err := k.recoverRunning(ctx, h)
	k.owner.start(h)
	if err != nil {
		return n, fmt.Errorf("recover session %s: %w", id, err)
	}
	return n, nil
}

// recoverRunning finishes the runs of h's session left running by its
// previous owner, and frees the session if its record still says busy.
func (k *Kernel) recoverRunning(ctx context.Context, h *held) (int, error) {
	runs, err := k.store.ListRuns(ctx, h.id, session.RunQuery{States: []session.RunState{session.RunRunning}})
	if err != nil {
		return 0, fmt.Errorf("list running runs: %w", err)
	}
	slices.Reverse(runs) // oldest first
	n := 0
	for _, r := range runs {
		if ar := h.current(); ar != nil && ar.run.ID == r.ID {
			continue // started by this replica, just now
		}
		err := k.recoverRun(ctx, h.token, r, interruptedMessage)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // its session is gone
		}
		if err != nil {
			return n, fmt.Errorf("recover run %s of session %s: %w", r.ID, r.SessionID, err)
		}
		n++
		k.log.Info("run recovered", "session", r.SessionID, "run", r.ID)
	}
	return n, nil
}

// freeSession frees session id if its record says it is busy, or names an
// active run, but no run of it is unfinished: a crash between recording a
// run's end and its session's lets the session think it is busy forever.
func (k *Kernel) freeSession(ctx context.Context, id string) error {
	work, err := k.hasWork(ctx, id)
	if err != nil || work {
		return err
	}
	return k.updateSession(ctx, id, func(s *session.Session) error {
		busy := s.State == session.StateRunning || s.State == session.StateWaitingInput
		if !busy && s.ActiveRunID == "" {
			return errUnchanged
		}
		if busy {
			s.State = session.StateCompleted
			if r, err := k.store.GetRun(ctx, s.ID, s.ActiveRunID); err == nil && r.Error != nil {
				s.State = session.StateError
			}
		}
		s.ActiveRunID, s.UpdatedAt = "", k.now().UTC()
		return nil
	})
}

// recoverRun finishes one run left running, under the lease token; if it
// has to end the run, message says why.
func (k *Kernel) recoverRun(ctx context.Context, token int64, r session.Run, message string) error {
	evs, err := k.runEvents(ctx, r)
	if err != nil {
		return err
	}
	rp := replayRun(evs)
	msgs, err := k.missingMessages(ctx, r, rp)
	if err != nil {
		return err
	}
	end := ending{sessionState: session.StateError, runState: session.RunInterrupted,
		runErr: &session.RunError{Code: session.ErrorCodeInterrupted, Message: message}}
	if last := rp.terminal; last != nil {
		end = endingOf(last) // it ended in the log; only its records are behind
	} else if len(evs) > 0 {
		closing, results := rp.closers()
		msgs = append(msgs, results...)
		closing = append(closing, session.RunErrored(end.runErr.Code, end.runErr.Message, r.Usage))
		if err := k.emit(ctx, token, r.SessionID, r.ID, closing...); err != nil {
			return err
		}
		rp.endSeq = closing[len(closing)-1].Seq
	}
	if err := k.appendRecovered(ctx, token, r, msgs); err != nil {
		return err
	}
	return k.recordRecovered(ctx, r, end, rp.endSeq)
}

// runEvents returns the run's events, from its RUN_STARTED to the end of
// the session's log (nothing is logged between runs, so they are all the
// run's). A run whose RUN_STARTED never reached the log has none.
func (k *Kernel) runEvents(ctx context.Context, r session.Run) ([]session.Event, error) {
	start := r.StartSeq
	if start == 0 {
		var err error
		if start, err = k.findRunStart(ctx, r); err != nil || start == 0 {
			return nil, err
		}
	}
	return k.readLog(ctx, r.SessionID, start-1)
}

// findRunStart looks for the run's RUN_STARTED near the end of the log,
// for a crash between appending it and recording its seq on the run.
func (k *Kernel) findRunStart(ctx context.Context, r session.Run) (int64, error) {
	s, err := k.store.GetSession(ctx, r.SessionID)
	if err != nil {
		return 0, fmt.Errorf("get session: %w", err)
	}
	evs, err := k.store.ReadEvents(ctx, r.SessionID, max(s.LastSeq-MaxEventPage, 0), MaxEventPage)
	if err != nil {
		return 0, fmt.Errorf("read events: %w", err)
	}
	for _, ev := range evs {
		if ev.Type == session.EventRunStarted && ev.RunID == r.ID {
			return ev.Seq, nil
		}
	}
	return 0, nil
}

// missingMessages returns the messages the run's events show but the
// history lacks: the user's input, an assistant message the crash cut off,
// and tool results that were logged but not recorded.
func (k *Kernel) missingMessages(ctx context.Context, r session.Run, rp *replayedRun) ([]session.Message, error) {
	history, err := k.store.ListMessages(ctx, r.SessionID, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	have := make(map[string]bool, len(history))
	for _, m := range history {
		have[m.ID] = true
		if m.Role == session.RoleTool {
			have["call:"+m.ToolCallID] = true
		}
	}
	var out []session.Message
	for _, m := range rp.messages() {
		key := m.ID
		if m.Role == session.RoleTool {
			key = "call:" + m.ToolCallID
		}
		if !have[key] {
			out = append(out, m)
		}
	}
	return out, nil
}

// appendRecovered records recovered messages as the run's.
func (k *Kernel) appendRecovered(ctx context.Context, token int64, r session.Run, msgs []session.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	now := k.now().UTC()
	for i := range msgs {
		msgs[i].SessionID, msgs[i].RunID, msgs[i].CreatedAt = r.SessionID, r.ID, now
	}
	if err := k.store.AppendMessages(ctx, token, msgs...); err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	return nil
}

// recordRecovered stores the run's end and frees its session.
func (k *Kernel) recordRecovered(ctx context.Context, r session.Run, end ending, endSeq int64) error {
	now := k.now().UTC()
	err := k.updateRun(ctx, &r, func(cur *session.Run) error {
		cur.State, cur.EndedAt, cur.Error, cur.EndSeq = end.runState, now, end.runErr, endSeq
		return nil
	})
	if err != nil {
		return err
	}
	err = k.updateSession(ctx, r.SessionID, func(s *session.Session) error {
		if s.ActiveRunID == r.ID {
			s.ActiveRunID = ""
		}
		if s.State != session.StateClosed {
			s.State, s.UpdatedAt = end.sessionState, now
		}
		return nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // deleted meanwhile: nothing left to free
	}
	return err
}

// endingOf reads how a run ended from its terminal event.
func endingOf(ev *session.Event) ending {
	if ev.Type == session.EventRunError {
		code, msg := ev.Member("code"), ev.Member("message")
		rs := session.RunFailed
		if code == session.ErrorCodeInterrupted {
			rs = session.RunInterrupted
		}
		return ending{runState: rs, sessionState: session.StateError, runErr: &session.RunError{Code: code, Message: msg}}
	}
	outcome, _ := ev.Fields()["outcome"].(map[string]any)
	if outcome["type"] != string(session.OutcomeCancelled) {
		return ending{runState: session.RunSucceeded, sessionState: session.StateCompleted}
	}
	if metaReason(ev) == session.ReasonInterrupted {
		return ending{runState: session.RunInterrupted, sessionState: session.StateCompleted}
	}
	return ending{runState: session.RunCancelled, sessionState: session.StateCompleted}
}
