package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Snapshot is a session's conversation as one piece, for a client that
// draws it anew (a reloaded page): the history of the runs that are over,
// and the point of the log the client follows on from. Shown together,
// Messages and the events after After hold every message once: the events
// begin with the RUN_STARTED of the run in progress, if there is one, and
// Messages holds nothing of that run.
type Snapshot struct {
	// Messages is the history of the runs that started at or before After,
	// all of which are over, oldest first; for a cleared session, from its
	// latest clear entry on.
	Messages []session.Message
	// After is a run boundary: just before the run in progress, or the
	// log's last event when no run is in progress (0 for an empty log).
	After int64
	// RunID is the run in progress, whose RUN_STARTED is event After+1, or
	// "" when no run is in progress.
	RunID string
	// Agent is the session's own agent: Messages written by another say so.
	Agent string
}

// MessagesSnapshot returns the session's snapshot. It reads only the store,
// so any replica answers it for any session.
//
// A run counts as in progress until its record says it ended, not merely
// until its last event: a stopped run's last messages (its cut-off answer,
// the results of its unanswered tool calls) reach the history after its
// last event, and only then is the run recorded as ended. Until then the
// snapshot leaves the run to its events.
func (k *Kernel) MessagesSnapshot(ctx context.Context, sessionID string) (Snapshot, error) {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return Snapshot{}, err
	}
	snap, err := k.snapshotPoint(ctx, s)
	if err != nil {
		return Snapshot{}, err
	}
	snap.Messages, err = k.messagesUpTo(ctx, s.ID, snap.After)
	if err != nil {
		return Snapshot{}, err
	}
	snap.Messages = session.AfterClear(snap.Messages, s.ClearedAt)
	snap.Agent = s.Agent
	return snap, nil
}

// snapshotPoint returns the run boundary a snapshot of s is taken at.
func (k *Kernel) snapshotPoint(ctx context.Context, s session.Session) (Snapshot, error) {
	if s.ActiveRunID != "" {
		run, err := k.store.GetRun(ctx, s.ID, s.ActiveRunID)
		if err != nil {
			return Snapshot{}, fmt.Errorf("get run: %w", err)
		}
		if run.StartSeq > 0 {
			return Snapshot{After: run.StartSeq - 1, RunID: run.ID}, nil
		}
		// Not started, or its RUN_STARTED is being logged: the log says.
	}
	return k.boundaryAt(ctx, s.ID, s.LastSeq)
}

// boundaryAt returns seq if it ends a run recorded as ended, else the
// boundary before the run event seq belongs to. When that cannot be told
// it returns the start of the log: a snapshot of nothing, followed by the
// whole log, is always right, only longer.
func (k *Kernel) boundaryAt(ctx context.Context, sessionID string, seq int64) (Snapshot, error) {
	if seq == 0 {
		return Snapshot{}, nil
	}
	evs, err := k.store.ReadEvents(ctx, sessionID, seq-1, 1)
	if err != nil {
		return Snapshot{}, fmt.Errorf("read events: %w", err)
	}
	if len(evs) == 0 || evs[0].RunID == "" {
		return Snapshot{}, nil
	}
	ev := evs[0]
	run, err := k.store.GetRun(ctx, sessionID, ev.RunID)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return Snapshot{}, nil
	case err != nil:
		return Snapshot{}, fmt.Errorf("get run: %w", err)
	case ev.Type.Ends() && run.State.Terminal():
		return Snapshot{After: seq}, nil
	case run.StartSeq > 0:
		return Snapshot{After: run.StartSeq - 1, RunID: run.ID}, nil
	}
	start, err := k.findRunStart(ctx, run) // logged, not yet recorded on the run
	if err != nil || start == 0 {
		return Snapshot{}, err
	}
	return Snapshot{After: start - 1, RunID: run.ID}, nil
}

// messagesUpTo returns the history of the runs that started at or before
// after. The history is in run order, so only its tail can belong to later
// runs: it is cut at the first message, from the end, of an earlier run.
func (k *Kernel) messagesUpTo(ctx context.Context, sessionID string, after int64) ([]session.Message, error) {
	msgs, err := k.store.ListMessages(ctx, sessionID, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	n := len(msgs)
	for n > 0 {
		later, err := k.startedAfter(ctx, sessionID, msgs[n-1].RunID, after)
		if err != nil {
			return nil, err
		}
		if !later {
			break
		}
		for runID := msgs[n-1].RunID; n > 0 && msgs[n-1].RunID == runID; {
			n--
		}
	}
	return msgs[:n], nil
}

// startedAfter reports whether run runID had not started by seq after.
func (k *Kernel) startedAfter(ctx context.Context, sessionID, runID string, after int64) (bool, error) {
	if runID == "" {
		return false, nil
	}
	run, err := k.store.GetRun(ctx, sessionID, runID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get run: %w", err)
	}
	if run.StartSeq == 0 { // its start is not recorded yet, or it never started
		return !run.State.Terminal(), nil
	}
	return run.StartSeq > after, nil
}
