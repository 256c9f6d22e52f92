package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// ForkRequest is a request to fork a session.
type ForkRequest struct {
	// AtMessage is the position of the last message the fork keeps: 0
	// keeps none. Nil keeps the source's whole completed history.
	AtMessage *int64
}

// ForkSession creates a new session from session id's history up to a
// message (see ForkRequest): the same agent, name, metadata, TTL and
// overrides, a copy of its memory as it is now, and the history's messages
// at the same positions. The fork's log starts with a run of its own that
// holds one MESSAGES_SNAPSHOT of that history, so its stream is a valid
// AG-UI stream from seq 1. Only history whose run has ended can be forked:
// forking a running session without AtMessage forks what its finished runs
// said. A closed session can be forked; the fork is open.
func (k *Kernel) ForkSession(ctx context.Context, id string, req ForkRequest) (session.Session, error) {
	src, err := k.GetSession(ctx, id)
	if err != nil {
		return session.Session{}, err
	}
	if _, err := k.runnableAgent(src.Agent); err != nil {
		return session.Session{}, err
	}
	msgs, err := k.forkHistory(ctx, src.ID, req.AtMessage)
	if err != nil {
		return session.Session{}, err
	}
	return k.createFork(ctx, src, msgs)
}

// Regenerate answers run runID of session id again: it forks the session
// at the message before the run's input and runs the same input in the
// fork. It returns the fork, as it is once the run started, and the run.
func (k *Kernel) Regenerate(ctx context.Context, id, runID string) (session.Session, session.Run, error) {
	run, err := k.GetRun(ctx, id, runID)
	if err != nil {
		return session.Session{}, session.Run{}, err
	}
	pos, err := k.inputPosition(ctx, run)
	if err != nil {
		return session.Session{}, session.Run{}, err
	}
	before := pos - 1
	fork, err := k.ForkSession(ctx, id, ForkRequest{AtMessage: &before})
	if err != nil {
		return session.Session{}, session.Run{}, err
	}
	// The fork refers to the input's images already (createFork).
	again, _, err := k.Run(ctx, fork.ID, RunRequest{Input: run.Input, imageRefs: run.Images, Overrides: run.Overrides.Clone(), Source: run.Source})
	if err != nil {
		k.discardFork(ctx, fork.ID)
		return session.Session{}, session.Run{}, err
	}
	fork, err = k.GetSession(ctx, fork.ID)
	return fork, again, err
}

// inputPosition returns the position of run's input in its session's
// history: the first message the run recorded.
func (k *Kernel) inputPosition(ctx context.Context, run session.Run) (int64, error) {
	var pos int64
	err := k.eachMessage(ctx, run.SessionID, 0, func(m session.Message) bool {
		if m.RunID == run.ID && m.Role == session.RoleUser {
			pos = m.Position
		}
		return pos == 0
	})
	if err != nil {
		return 0, err
	}
	if pos == 0 || (run.Input == "" && len(run.Images) == 0) {
		return 0, errdefs.New(errdefs.ErrConflict, errdefs.CodeRunNotRegenerable,
			"run %s has no input of its own in the history: it never started, joined another run as a steer, or holds a fork's snapshot", run.ID)
	}
	return pos, nil
}

// forkHistory returns the messages a fork of session id keeps.
func (k *Kernel) forkHistory(ctx context.Context, id string, at *int64) ([]session.Message, error) {
	var (
		msgs []session.Message
		err  error
	)
	if at != nil {
		msgs, err = k.historyUpTo(ctx, id, *at)
	} else {
		msgs, err = k.completedHistory(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	return msgs, checkForkPoint(msgs)
}

// historyUpTo returns messages 1..at of session id. Message at must
// belong to a run that has ended: a running run's messages may still be
// followed by the results of its tool calls.
func (k *Kernel) historyUpTo(ctx context.Context, id string, at int64) ([]session.Message, error) {
	if at < 0 {
		return nil, errdefs.Invalid("at_message", "must not be negative")
	}
	var msgs []session.Message
	err := k.eachMessage(ctx, id, 0, func(m session.Message) bool {
		msgs = append(msgs, m)
		return m.Position < at
	})
	if err != nil {
		return nil, err
	}
	if int64(len(msgs)) < at {
		return nil, errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeMessageNotFound,
			"session %s has no message at position %d (its last is %d)", id, at, len(msgs)).With("last_position", len(msgs))
	}
	if at == 0 {
		return nil, nil
	}
	msgs = msgs[:at]
	ended, err := k.runEnded(ctx, id, msgs[at-1].RunID)
	if err != nil {
		return nil, err
	}
	if !ended {
		return nil, errdefs.New(errdefs.ErrConflict, errdefs.CodeMessageNotCompleted,
			"message %d belongs to run %s, which has not ended: fork at an earlier message, or without at_message to fork the completed history",
			at, msgs[at-1].RunID).With("run_id", msgs[at-1].RunID)
	}
	return msgs, nil
}

// completedHistory returns session id's history without the messages of
// a run that has not ended. Runs are sequential, so those are at its end.
func (k *Kernel) completedHistory(ctx context.Context, id string) ([]session.Message, error) {
	var msgs []session.Message
	if err := k.eachMessage(ctx, id, 0, func(m session.Message) bool { msgs = append(msgs, m); return true }); err != nil {
		return nil, err
	}
	for len(msgs) > 0 {
		last := msgs[len(msgs)-1].RunID
		ended, err := k.runEnded(ctx, id, last)
		if err != nil {
			return nil, err
		}
		if ended {
			// It may have ended after the read: its last messages are
			// stored now, and come before any of the next run's.
			return k.runTail(ctx, id, msgs)
		}
		for len(msgs) > 0 && msgs[len(msgs)-1].RunID == last {
			msgs = msgs[:len(msgs)-1]
		}
	}
	return msgs, nil
}

// runTail returns msgs with the messages stored after them that belong to
// the run of their last one.
func (k *Kernel) runTail(ctx context.Context, id string, msgs []session.Message) ([]session.Message, error) {
	last := msgs[len(msgs)-1]
	err := k.eachMessage(ctx, id, last.Position, func(m session.Message) bool {
		if m.RunID != last.RunID {
			return false
		}
		msgs = append(msgs, m)
		return true
	})
	return msgs, err
}

// runEnded reports whether run runID of session id has ended, so that
// every message it records is stored. A message of no known run (one
// kerneld wrote itself) is as good as ended.
func (k *Kernel) runEnded(ctx context.Context, id, runID string) (bool, error) {
	r, err := k.store.GetRun(ctx, id, runID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get run: %w", err)
	}
	return r.State.Terminal(), nil
}

// forkPage is how many messages a fork reads or writes at once.
const forkPage = 500

// eachMessage calls fn with session id's messages after position after,
// oldest first, until fn returns false or none is left.
func (k *Kernel) eachMessage(ctx context.Context, id string, after int64, fn func(session.Message) bool) error {
	for {
		page, err := k.store.ListMessages(ctx, id, after, forkPage)
		if err != nil {
			return fmt.Errorf("list messages: %w", err)
		}
		for _, m := range page {
			if !fn(m) {
				return nil
			}
			after = m.Position
		}
		if len(page) < forkPage {
			return nil
		}
	}
}

// checkForkPoint refuses a history that ends between a tool call and its
// result: no model accepts a call left unanswered.
func checkForkPoint(msgs []session.Message) error {
	open := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		delete(open, m.ToolCallID)
	}
	if len(open) == 0 {
		return nil
	}
	return errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeUnansweredToolCalls,
		"message %d leaves %d tool calls without their results: fork at their last result, or before the message that made them",
		len(msgs), len(open))
}

// createFork stores the fork of src that keeps msgs. It is written as a
// run of the fork (RUN_STARTED, MESSAGES_SNAPSHOT, the messages, then
// RUN_FINISHED), under the fork's lease, so a crash midway leaves a run
// that recovery ends like any other. Any other failure removes the fork.
func (k *Kernel) createFork(ctx context.Context, src session.Session, msgs []session.Message) (session.Session, error) {
	if err := k.checkOpen(); err != nil {
		return session.Session{}, err
	}
	memory, err := k.store.ListMemory(ctx, src.ID)
	if err != nil {
		return session.Session{}, fmt.Errorf("list memory: %w", err)
	}
	now := k.now().UTC()
	run := session.Run{ID: session.NewID(), State: session.RunRunning, CreatedAt: now, StartedAt: now}
	f := forkOf(src, msgs, now)
	f.ActiveRunID, run.SessionID = run.ID, f.ID
	// Nobody knows the fork's id yet, but a listing by forked_from may
	// show it: a run posted meanwhile waits on this lock, or behind the
	// snapshot's run.
	admitted, err := k.admitSession(ctx)
	if err != nil {
		return session.Session{}, err
	}
	unlock := k.lockSession(f.ID)
	defer unlock()
	err = k.store.CreateSession(ctx, f)
	admitted()
	if err != nil {
		return session.Session{}, fmt.Errorf("create session: %w", err)
	}
	// The fork shows the images of the history it copies.
	if err := k.images.Share(ctx, src.ID, f.ID); err != nil {
		k.discardFork(ctx, f.ID)
		return session.Session{}, fmt.Errorf("share images: %w", err)
	}
	h, _, err := k.owner.hold(ctx, f.ID)
	if err == nil {
		err = k.seedFork(ctx, h.token, &f, run, msgs, memory)
		k.owner.release(h)
	}
	if err != nil {
		k.discardFork(ctx, f.ID)
		return session.Session{}, err
	}
	k.startQueuedLater(f.ID)
	return f, nil
}

// forkOf returns the record of a new fork of src that keeps msgs, running
// the run that writes them.
func forkOf(src session.Session, msgs []session.Message, now time.Time) session.Session {
	f := session.Session{
		ID: session.NewID(), Tenant: src.Tenant, Agent: src.Agent, Name: src.Name,
		Metadata: maps.Clone(src.Metadata), State: session.StateRunning, CreatedAt: now, UpdatedAt: now,
		TTL: src.TTL, ForkedFrom: src.ID,
	}
	f.RootID = f.ID
	f.ForkPosition = int64(len(msgs))
	f.Overrides = src.Overrides.Clone()
	f.Model = src.Model
	f.AgentState = bytes.Clone(src.AgentState)
	f.Compaction = lastCompaction(msgs)
	f.ClearedAt = lastClear(msgs)
	return f
}

// seedFork writes the fork f's memory, history and first run, and leaves
// f as it is stored then.
func (k *Kernel) seedFork(ctx context.Context, token int64, f *session.Session, run session.Run,
	msgs []session.Message, memory []session.MemoryEntry) error {
	for _, e := range memory {
		e.SessionID = f.ID
		if err := k.store.PutMemory(ctx, e, max(k.limits.MaxMemoryEntries, len(memory))); err != nil {
			return fmt.Errorf("copy memory: %w", err)
		}
	}
	if err := k.store.CreateRun(ctx, run, session.RunConstraints{}); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	// A fork of a cleared history shows, as its source does, nothing
	// before the clear; it keeps the messages, at their positions.
	start := []session.Event{forkStarted(f, run.ID, msgs), session.MessagesSnapshot(session.AfterClear(msgs, f.ClearedAt), f.Agent)}
	if err := k.emit(ctx, token, f.ID, run.ID, start...); err != nil {
		return err
	}
	if err := k.copyMessages(ctx, token, f.ID, run.ID, msgs); err != nil {
		return err
	}
	end := []session.Event{session.RunFinished(f.ID, run.ID, session.OutcomeSuccess, "", session.Usage{})}
	if err := k.emit(ctx, token, f.ID, run.ID, end...); err != nil {
		return err
	}
	run.State, run.EndedAt, run.StartSeq, run.EndSeq = session.RunSucceeded, k.now(), start[0].Seq, end[0].Seq
	if err := k.saveRun(ctx, &run); err != nil {
		return err
	}
	return k.updateSession(ctx, f.ID, func(s *session.Session) error {
		err := settledState(s, run, k.now().UTC())
		*f = *s
		f.Version++
		return err
	})
}

// forkStarted is the RUN_STARTED of a fork's first run: its parentRunId
// is the source's run that said the last message kept, as AG-UI marks a
// branch, and metadata.kerneld.forkedFrom says where the fork came from.
func forkStarted(f *session.Session, runID string, msgs []session.Message) session.Event {
	parent := ""
	if len(msgs) > 0 {
		parent = msgs[len(msgs)-1].RunID
	}
	ev := session.RunStartedFrom(f.ID, runID, parent)
	ev.Meta = session.ForkMeta(f.ForkedFrom, f.ForkPosition)
	return ev
}

// copyMessages appends msgs to the fork sessionID's history, as said by
// its run runID, a page at a time.
func (k *Kernel) copyMessages(ctx context.Context, token int64, sessionID, runID string, msgs []session.Message) error {
	for len(msgs) > 0 {
		n := min(len(msgs), forkPage)
		page := make([]session.Message, n)
		for i, m := range msgs[:n] {
			m.SessionID, m.RunID, m.Position = sessionID, runID, 0
			page[i] = m
		}
		if err := k.store.AppendMessages(ctx, token, page...); err != nil {
			return fmt.Errorf("copy messages: %w", err)
		}
		msgs = msgs[n:]
	}
	return nil
}

// discardFork removes a fork that could not be completed.
func (k *Kernel) discardFork(ctx context.Context, id string) {
	if err := k.store.DeleteSession(context.WithoutCancel(ctx), id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		k.log.Error("remove an incomplete fork", "session", id, "err", err)
	}
}

// startQueuedLater has the fork id's owner start what was posted to it
// while its first run was written: that run held its lease, and a run
// queued behind it had nobody to start it.
func (k *Kernel) startQueuedLater(id string) {
	ctx := context.WithoutCancel(k.ctx)
	if work, err := k.hasWork(ctx, id); err == nil && work {
		if err := k.ensureLocked(ctx, id); err != nil {
			k.log.Warn("start the runs queued on a new fork", "session", id, "err", err) // the take-over scan finds them
		}
	}
}

// lastCompaction returns the latest compaction entry among msgs, which the
// fork's model must go on seeing in place of what it summarised, or nil:
// the source's own latest compaction may lie past the fork's history. The
// entry's summary is its message's content and its position the message's
// (recordCompaction fills them only in the session's copy), so both are
// taken from the message: without them the fork's model would see the
// kept tail alone.
func lastCompaction(msgs []session.Message) *session.Compaction {
	for i := len(msgs) - 1; i >= 0; i-- {
		if c := msgs[i].Compaction; msgs[i].Role == session.RoleCompaction && c != nil {
			out := *c
			out.Position, out.Summary = msgs[i].Position, msgs[i].Content
			return &out
		}
	}
	return nil
}

// lastClear returns the position of the latest clear entry among msgs,
// from which the fork shows its history as its source did, or 0.
func lastClear(msgs []session.Message) int64 {
	for i := len(msgs) - 1; i >= 0; i-- {
		if c := msgs[i].Compaction; msgs[i].Role == session.RoleCompaction && c != nil && c.Cleared {
			return msgs[i].Position
		}
	}
	return 0
}
