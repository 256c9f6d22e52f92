package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Clearing a conversation. POST /sessions/{id}/clear empties a session's
// history in place, in a run of its own (kind clear), since nothing is
// logged between runs: RUN_STARTED, CUSTOM kerneld.session.cleared,
// RUN_FINISHED. The run adds a clear entry to the history, a compaction
// entry without a summary whose first kept message is the next one, and
// makes it the session's latest compaction: the model sees nothing of
// what came before. The session's ClearedAt names the entry, so listings
// and snapshots of the history start there. The log and the stored
// history keep everything, for replay, export and repair. The memory
// stays unless the client asks; the unread counts go back to zero, as
// there is nothing left to read.

// ClearRequest says what a clear takes beside the history.
type ClearRequest struct {
	// Memory clears the session's memory too.
	Memory bool
}

// Clear empties session sessionID's history in place, in a run of its
// own: the session must be idle (a busy one is 409 session_busy, queued
// runs included). It returns the run once it has ended and the clear
// entry it recorded (nil when the run failed before recording it).
func (k *Kernel) Clear(ctx context.Context, sessionID string, req ClearRequest) (session.Run, *session.Message, error) {
	run, _, err := k.Run(ctx, sessionID, RunRequest{kind: session.RunKindClear, clearMemory: req.Memory})
	if err != nil {
		return session.Run{}, nil, err
	}
	sessionID = run.SessionID // the key the session is stored under
	run, err = k.waitRun(ctx, sessionID, run.ID, ended)
	if err != nil {
		return run, nil, err
	}
	s, err := k.store.GetSession(ctx, sessionID)
	if err != nil || s.ClearedAt == 0 {
		return run, nil, err
	}
	msgs, err := k.store.ListMessages(ctx, sessionID, s.ClearedAt-1, 1)
	if err != nil {
		return run, nil, fmt.Errorf("read clear entry: %w", err)
	}
	if len(msgs) == 0 || msgs[0].RunID != run.ID {
		return run, nil, nil // this run cleared nothing
	}
	return run, &msgs[0], nil
}

// clearHistory is the whole of a clear run: it drops the memory when the
// run asks, records the clear entry and logs kerneld.session.cleared. A
// run continued after its entry was recorded records the session's side
// again and logs the event: a client told twice starts anew twice, which
// is better than never.
func (r *runner) clearHistory(ctx context.Context) error {
	last, err := r.k.store.RecentMessages(r.storeCtx(), r.run.SessionID, 1)
	if err != nil {
		return fmt.Errorf("load history: %w", err)
	}
	if len(last) == 1 && last[0].RunID == r.run.ID && last[0].Compaction != nil {
		entry := last[0]
		if err := r.markCleared(&entry); err != nil {
			return err
		}
		return r.emit(session.ClearedEvent(r.run.ID, &entry, r.run.ClearMemory))
	}
	if err := r.loadHistory(ctx); err != nil {
		return err
	}
	if r.run.ClearMemory {
		if err := r.dropMemory(); err != nil {
			return err
		}
	}
	view := r.modelView()
	entry := session.Message{ID: session.NewMessageID(), Role: session.RoleCompaction,
		Compaction: &session.Compaction{Cleared: true, Messages: len(view), TokensBefore: estimateTokens(view)}}
	entry.Compaction.FirstKept = 2 // the first message after the entry
	if len(last) == 1 {
		entry.Compaction.FirstKept = last[0].Position + 2
	}
	if err := r.recordClear(&entry); err != nil {
		return err
	}
	return r.emit(session.ClearedEvent(r.run.ID, &entry, r.run.ClearMemory))
}

// dropMemory deletes every entry of the session's memory.
func (r *runner) dropMemory() error {
	ctx := r.storeCtx()
	entries, err := r.k.store.ListMemory(ctx, r.run.SessionID)
	if err != nil {
		return fmt.Errorf("list memory: %w", err)
	}
	for _, e := range entries {
		if err := r.k.store.DeleteMemory(ctx, r.run.SessionID, e.Key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("clear memory: %w", err)
		}
	}
	return nil
}

// recordClear appends the clear entry to the history, after the events
// before it are durable (as record does), and marks the session cleared.
func (r *runner) recordClear(entry *session.Message) error {
	if _, err := r.events.flush(); err != nil {
		return &emitError{err: err}
	}
	entry.SessionID, entry.RunID, entry.CreatedAt = r.run.SessionID, r.run.ID, r.k.now().UTC()
	msgs := []session.Message{*entry}
	if err := r.k.store.AppendMessages(r.storeCtx(), r.h.token, msgs...); err != nil {
		return &emitError{err: fmt.Errorf("append clear entry: %w", err)}
	}
	entry.Position = msgs[0].Position
	return r.markCleared(entry)
}

// markCleared makes the clear entry the session's latest compaction, so
// the model sees nothing before it, and the place its history is shown
// from; its readers have nothing left to read.
func (r *runner) markCleared(entry *session.Message) error {
	latest := *entry.Compaction
	latest.Position = entry.Position
	err := r.k.updateSession(r.storeCtx(), r.run.SessionID, func(s *session.Session) error {
		s.Compaction, s.ClearedAt, s.Replies = &latest, entry.Position, nil
		return nil
	})
	if err != nil {
		return &emitError{err: fmt.Errorf("record clear: %w", err)}
	}
	return nil
}
