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
	return slices.BinarySearchFunc(rec.runs, id, func(r session.Run, id string) int {
		return strings.Compare(r.ID, id)
	})
}

// CreateRun stores a new run of an existing session. A run id already used
// in that session is ErrConflict.
func (s *Store) CreateRun(ctx context.Context, r session.Run) error {
	return s.write(r.SessionID, func(rec *record) error {
		i, ok := rec.findRun(r.ID)
		if ok {
			return errdefs.New(errdefs.ErrConflict, "run_exists", "run %s already exists", r.ID)
		}
		rec.runs = slices.Insert(rec.runs, i, cloneRun(r))
		return nil
	})
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

// UpdateRun replaces the stored run with r.
func (s *Store) UpdateRun(ctx context.Context, r session.Run) error {
	return s.write(r.SessionID, func(rec *record) error {
		i, ok := rec.findRun(r.ID)
		if !ok {
			return session.RunNotFound(r.ID)
		}
		rec.runs[i] = cloneRun(r)
		return nil
	})
}

// ListRuns returns a session's runs newest first, only those older than
// before when it is not empty, at most limit of them when limit > 0.
func (s *Store) ListRuns(ctx context.Context, sessionID, before string, limit int) ([]session.Run, error) {
	var out []session.Run
	err := s.read(sessionID, func(rec *record) error {
		end := len(rec.runs)
		if before != "" {
			end, _ = rec.findRun(before)
		}
		for i := end - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
			out = append(out, cloneRun(rec.runs[i]))
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
		return errdefs.New(errdefs.ErrNotFound, "run_not_found",
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
