package kernel

import (
	"context"
	"fmt"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// RunFilter selects a session's runs in a listing. Empty fields match all.
type RunFilter struct {
	State session.RunState
}

// ListRunsWhere returns a page of a session's runs passing f, newest
// first. The state filter is the store's: it reads no run it does not list.
func (k *Kernel) ListRunsWhere(ctx context.Context, sessionID string, f RunFilter, page PageRequest) (Page[session.Run], error) {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return Page[session.Run]{}, err
	}
	sessionID = s.ID // the key it is stored under
	limit, err := page.size()
	if err != nil {
		return Page[session.Run]{}, err
	}
	before, err := decodeCursor(page.Cursor)
	if err != nil {
		return Page[session.Run]{}, err
	}
	if before != "" {
		if _, err := k.store.GetRun(ctx, sessionID, before); err != nil {
			return Page[session.Run]{}, errdefs.Invalid("cursor", "not a cursor of this session's runs")
		}
	}
	q := session.RunQuery{Before: before, Limit: limit + 1}
	if f.State != "" {
		if !f.State.Valid() {
			return Page[session.Run]{}, errdefs.Invalid("state", "unknown run state")
		}
		q.States = []session.RunState{f.State}
	}
	runs, err := k.store.ListRuns(ctx, sessionID, q)
	if err != nil {
		return Page[session.Run]{}, fmt.Errorf("list runs: %w", err)
	}
	return paginate(runs, limit, func(r session.Run) string { return r.ID }), nil
}

// RunEvents returns up to limit events of one run with seq > after, in
// seq order, and the seq to resume after: the last event it looked at,
// which may be another run's (the log interleaves nothing between runs
// but notices such as a queued run's). It reads the log from the run's
// RUN_STARTED to its end only, never the whole log.
func (k *Kernel) RunEvents(ctx context.Context, sessionID, runID string, after int64, limit int) ([]session.Event, int64, error) {
	r, err := k.GetRun(ctx, sessionID, runID)
	if err != nil {
		return nil, after, err
	}
	sessionID = r.SessionID // the key it is stored under
	if after < 0 {
		return nil, after, errdefs.Invalid("after", "must not be negative")
	}
	if limit <= 0 || limit > MaxEventPage {
		limit = MaxEventPage
	}
	if r.StartSeq == 0 {
		return nil, after, nil // not started: nothing logged yet
	}
	next := max(after, r.StartSeq-1)
	var out []session.Event
	for len(out) < limit && (r.EndSeq == 0 || next < r.EndSeq) {
		evs, err := k.store.ReadEvents(ctx, sessionID, next, limit)
		if err != nil {
			return nil, after, fmt.Errorf("read events: %w", err)
		}
		for _, ev := range evs {
			if r.EndSeq > 0 && ev.Seq > r.EndSeq || len(out) == limit {
				return out, next, nil
			}
			if ev.RunID == runID {
				out = append(out, ev)
			}
			next = ev.Seq
		}
		if len(evs) < limit {
			break
		}
	}
	return out, next, nil
}
