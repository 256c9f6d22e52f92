package memory

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// findRun returns the index of run id in rec.runs and whether it is there.
func (rec *record) findRun(id string) (int, bool) {
	i, ok := rec.runAt[id]
	return i, ok
}

// CreateRun stores a new run of an existing session, checking c with the
// session's lock held; see kernel.RunStore.
func (s *Store) CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error {
	return s.write(r.SessionID, func(rec *record) error {
		if _, ok := rec.findRun(r.ID); ok {
			return session.RunExists(r.ID)
		}
		if err := rec.check(r, c); err != nil {
			return err
		}
		if rec.runAt == nil {
			rec.runAt = make(map[string]int)
		}
		rec.runAt[r.ID] = len(rec.runs)
		rec.runs = append(rec.runs, cloneRun(r))
		return nil
	})
}

// check applies a new run's constraints to the session's runs.
func (rec *record) check(r session.Run, c session.RunConstraints) error {
	queued := 0
	for i := len(rec.runs) - 1; i >= 0; i-- {
		old := &rec.runs[i]
		if r.IdempotencyKey != "" && !c.IdempotentSince.IsZero() &&
			old.IdempotencyKey == r.IdempotencyKey && !old.CreatedAt.Before(c.IdempotentSince) {
			return &session.DuplicateRunError{Run: cloneRun(*old)}
		}
		if old.State == session.RunQueued {
			queued++
		}
	}
	if c.MaxQueued > 0 && r.State == session.RunQueued && queued >= c.MaxQueued {
		return session.QueueFull(r.SessionID, c.MaxQueued)
	}
	return nil
}

// GetRun returns run runID of session sessionID.
func (s *Store) GetRun(ctx context.Context, sessionID, runID string) (session.Run, error) {
	var out session.Run
	err := s.read(sessionID, func(rec *record) error {
		i, ok := rec.findRun(runID)
		if !ok {
			return session.RunNotFound(runID)
		}
		out = cloneRun(rec.runs[i])
		return nil
	})
	return out, err
}

// UpdateRun replaces the stored run with r if it is still at r.Version;
// see kernel.RunStore.
func (s *Store) UpdateRun(ctx context.Context, r session.Run) error {
	return s.write(r.SessionID, func(rec *record) error {
		i, ok := rec.findRun(r.ID)
		if !ok {
			return session.RunNotFound(r.ID)
		}
		if rec.runs[i].Version != r.Version {
			return session.ErrStale
		}
		rec.runs[i] = cloneRun(r)
		rec.runs[i].Version++
		return nil
	})
}

// ListRuns returns a session's runs matching q, most recently created
// first.
func (s *Store) ListRuns(ctx context.Context, sessionID string, q session.RunQuery) ([]session.Run, error) {
	var out []session.Run
	err := s.read(sessionID, func(rec *record) error {
		end := len(rec.runs)
		if q.Before != "" {
			var ok bool
			if end, ok = rec.findRun(q.Before); !ok {
				return nil
			}
		}
		for i := end - 1; i >= 0 && (q.Limit <= 0 || len(out) < q.Limit); i-- {
			if len(q.States) == 0 || slices.Contains(q.States, rec.runs[i].State) {
				out = append(out, cloneRun(rec.runs[i]))
			}
		}
		return nil
	})
	return out, err
}

// FindRunByIdempotencyKey returns the newest run of the session created
// with key at or after since. An empty key matches no run: runs created
// without one must not be mistaken for each other.
func (s *Store) FindRunByIdempotencyKey(ctx context.Context, sessionID, key string, since time.Time) (session.Run, error) {
	var out session.Run
	err := s.read(sessionID, func(rec *record) error {
		for i := len(rec.runs) - 1; i >= 0 && key != ""; i-- {
			r := &rec.runs[i]
			if r.IdempotencyKey == key && !r.CreatedAt.Before(since) {
				out = cloneRun(*r)
				return nil
			}
		}
		return errdefs.New(errdefs.ErrNotFound, errdefs.CodeRunNotFound,
			"no run of session %s with idempotency key %q", sessionID, key)
	})
	return out, err
}

// ListRunsByState returns every run in one of states, of any session,
// oldest first: by CreatedAt, then by id for runs created together.
func (s *Store) ListRunsByState(ctx context.Context, states ...session.RunState) ([]session.Run, error) {
	var out []session.Run
	if len(states) == 0 {
		return out, nil
	}
	s.mu.RLock()
	for _, rec := range s.sessions {
		out = rec.appendRunsIn(out, states)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b session.Run) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// appendRunsIn appends copies of the record's runs in one of states to out.
func (rec *record) appendRunsIn(out []session.Run, states []session.RunState) []session.Run {
	rec.mu.RLock()
	defer rec.mu.RUnlock()
	for i := range rec.runs {
		if slices.Contains(states, rec.runs[i].State) {
			out = append(out, cloneRun(rec.runs[i]))
		}
	}
	return out
}
