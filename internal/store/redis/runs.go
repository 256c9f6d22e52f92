package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// CreateRun stores a new run of an existing session, checking c
// atomically with the insert, so two replicas racing with one key store
// one run. An existing run id is ErrConflict (code "run_exists"). With
// r.IdempotencyKey set, if a run of the session was created with that key
// at or after c.IdempotentSince, nothing is stored and the error is a
// *session.DuplicateRunError carrying the last such run. With
// c.MaxQueued > 0 and r.State queued, a session that already holds
// c.MaxQueued queued runs gets ErrExhausted (code "queue_full"). The
// checks fail in that order.
func (s *Store) CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error {
	k := s.keysOf(r.SessionID)
	args, err := s.runArgs(r, r.Version)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	since := ""
	if !c.IdempotentSince.IsZero() {
		since = itoa(micros(c.IdempotentSince))
	}
	args = append(args, since, max(c.MaxQueued, 0))
	reply, err := scriptRunCreate.Run(ctx, s.rdb, []string{k.s, k.runs, k.runm, k.runi, k.runst, k.idem}, args...).StringSlice()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(r.SessionID)
	case isReply(err, replyExists):
		return session.RunExists(r.ID)
	case isReply(err, replyFull):
		return session.QueueFull(r.SessionID, c.MaxQueued)
	case err != nil:
		return fmt.Errorf("create run %s: %w", r.ID, err)
	case len(reply) == 2 && reply[0] == "DUP":
		dup, err := decodeRun(reply[1])
		if err != nil {
			return fmt.Errorf("create run %s: %w", r.ID, err)
		}
		return &session.DuplicateRunError{Run: dup}
	}
	return nil
}

// UpdateRun replaces the stored run with r if the stored Version equals
// r.Version; the stored Version becomes r.Version+1. Otherwise it changes
// nothing and returns an error wrapping session.ErrStale.
func (s *Store) UpdateRun(ctx context.Context, r session.Run) error {
	k := s.keysOf(r.SessionID)
	args, err := s.runArgs(r, r.Version+1)
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	err = scriptRunUpdate.Run(ctx, s.rdb, []string{k.s, k.runs, k.runm, k.runst, k.idem}, append(args, r.Version)...).Err()
	if nf := notFound(err, r.SessionID, r.ID); nf != nil {
		return nf
	}
	if isReply(err, replyStale) {
		return fmt.Errorf("update run %s: %w", r.ID, session.ErrStale)
	}
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	return nil
}

// runArgs returns the script arguments that store r with version: the
// prefix, the session and run ids, the record, then the fields the run's
// meta holds (see parse_run_meta in lib.lua).
func (s *Store) runArgs(r session.Run, version int64) ([]any, error) {
	r.Version = version
	rec, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode run: %w", err)
	}
	return []any{s.prefix, r.SessionID, r.ID, rec, version, string(r.State), micros(r.CreatedAt), r.IdempotencyKey}, nil
}

// decodeRun decodes a stored run.
func decodeRun(rec string) (session.Run, error) {
	var r session.Run
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return session.Run{}, fmt.Errorf("decode run: %w", err)
	}
	return r, nil
}

// GetRun returns run runID of session sessionID.
func (s *Store) GetRun(ctx context.Context, sessionID, runID string) (session.Run, error) {
	k := s.keysOf(sessionID)
	pipe := s.rdb.Pipeline()
	rec := pipe.HGet(ctx, k.runs, runID)
	exists := pipe.Exists(ctx, k.s)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return session.Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	switch {
	case exists.Val() == 0:
		return session.Run{}, session.SessionNotFound(sessionID)
	case errors.Is(rec.Err(), goredis.Nil):
		return session.Run{}, session.RunNotFound(runID)
	}
	r, err := decodeRun(rec.Val())
	if err != nil {
		return session.Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	return r, nil
}

// ListRuns returns a session's runs matching q, most recently created
// first: one script reads the ids from runi (or, with states, from each
// state's range of runst) and the records they name.
func (s *Store) ListRuns(ctx context.Context, sessionID string, q session.RunQuery) ([]session.Run, error) {
	k := s.keysOf(sessionID)
	args := []any{q.Before, max(q.Limit, 0)}
	for _, st := range q.States {
		if !slices.Contains(args[2:], any(string(st))) {
			args = append(args, string(st))
		}
	}
	recs, err := scriptRunList.Run(ctx, s.rdb, []string{k.s, k.runi, k.runs, k.runst}, args...).StringSlice()
	if isReply(err, replyNoSession) {
		return nil, session.SessionNotFound(sessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("list runs of session %s: %w", sessionID, err)
	}
	return decodeRuns(recs)
}

// decodeRuns decodes stored runs.
func decodeRuns(recs []string) ([]session.Run, error) {
	out := make([]session.Run, 0, len(recs))
	for _, rec := range recs {
		r, err := decodeRun(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// FindRunByIdempotencyKey returns the newest run of the session created
// with key at or after since. An empty key matches no run: runs created
// without one must not be mistaken for each other.
func (s *Store) FindRunByIdempotencyKey(ctx context.Context, sessionID, key string, since time.Time) (session.Run, error) {
	k := s.keysOf(sessionID)
	rec, err := scriptRunFind.Run(ctx, s.rdb, []string{k.s, k.runs, k.runm, k.idem}, key, micros(since)).Text()
	switch {
	case isReply(err, replyNoSession):
		return session.Run{}, session.SessionNotFound(sessionID)
	case isReply(err, replyNoRun):
		return session.Run{}, errdefs.New(errdefs.ErrNotFound, errdefs.CodeRunNotFound,
			"no run of session %s with idempotency key %q", sessionID, key)
	case err != nil:
		return session.Run{}, fmt.Errorf("find run by idempotency key: %w", err)
	}
	r, err := decodeRun(rec)
	if err != nil {
		return session.Run{}, fmt.Errorf("find run by idempotency key: %w", err)
	}
	return r, nil
}

// ListRunsByState returns every run in one of states, of any session,
// oldest first: by CreatedAt, then by id for runs created together.
func (s *Store) ListRunsByState(ctx context.Context, states ...session.RunState) ([]session.Run, error) {
	if len(states) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	members := make([]*goredis.StringSliceCmd, len(states))
	for i, st := range states {
		members[i] = pipe.ZRange(ctx, s.prefix+"runs:"+string(st), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("list runs by state: %w", err)
	}
	pipe = s.rdb.Pipeline()
	var recs []*goredis.StringCmd
	for _, cmd := range members {
		for _, m := range cmd.Val() {
			runID, sessionID, _ := strings.Cut(m, "\t")
			recs = append(recs, pipe.HGet(ctx, s.keysOf(sessionID).runs, runID))
		}
	}
	if len(recs) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("list runs by state: %w", err)
	}
	out := make([]session.Run, 0, len(recs))
	for _, cmd := range recs {
		if errors.Is(cmd.Err(), goredis.Nil) {
			continue // its session was deleted since the index was read
		}
		r, err := decodeRun(cmd.Val())
		if err != nil {
			return nil, fmt.Errorf("list runs by state: %w", err)
		}
		if slices.Contains(states, r.State) { // else it moved on since
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b session.Run) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}
