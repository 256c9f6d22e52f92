package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// runColumns is the column list scanRun reads, in its order.
const runColumns = `session_id, id, state, input, idempotency_key, created_at, started_at,
	ended_at, error_code, error_message, input_tokens, output_tokens, start_seq, end_seq, version, ext`

// createRunSQL inserts a run only if its session exists and its id is
// free there; only when it inserts nothing is it worth asking which check
// failed.
const createRunSQL = `INSERT INTO runs (` + runColumns + `)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
	WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?) ON CONFLICT DO NOTHING`

// updateRunSQL replaces every column of a run but its keys, if it is still
// at the version it was read at, and moves its version on.
const updateRunSQL = `UPDATE runs SET state = ?, input = ?, idempotency_key = ?, created_at = ?,
	started_at = ?, ended_at = ?, error_code = ?, error_message = ?, input_tokens = ?,
	output_tokens = ?, start_seq = ?, end_seq = ?, ext = ?, version = version + 1
	WHERE session_id = ? AND id = ? AND version = ?`

// CreateRun stores a new run of an existing session, checking c in the
// same transaction; see kernel.RunStore.
func (s *Store) CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error {
	ext, err := encodeExt(r.RunExt)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		return tx.createRun(r, c, ext)
	})
}

// createRun inserts the new run r, checking c first.
func (tx *batchTx) createRun(r session.Run, c session.RunConstraints, ext any) (own, err error) {
	// A taken id comes first: checkRun would answer a run created again
	// with its own key as a replay of itself.
	var one int
	switch err := tx.queryRow(stmtRunExists, r.SessionID, r.ID).Scan(&one); {
	case err == nil:
		return session.RunExists(r.ID), nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if own, err := tx.checkRun(r, c); own != nil || err != nil {
		return own, err
	}
	code, msg := runErrorArgs(r.Error)
	created, err := tx.exec(stmtCreateRun, r.SessionID, r.ID, string(r.State), r.Input,
		r.IdempotencyKey, micros(r.CreatedAt), nullMicros(r.StartedAt), nullMicros(r.EndedAt),
		code, msg, r.Usage.InputTokens, r.Usage.OutputTokens, r.StartSeq, r.EndSeq, r.Version, ext,
		r.SessionID)
	if err != nil {
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if created {
		return nil, nil
	}
	return tx.missingRun(r.SessionID, session.RunExists(r.ID))
}

// checkRun applies a new run's constraints in the writer's transaction.
func (tx *batchTx) checkRun(r session.Run, c session.RunConstraints) (own, err error) {
	if r.IdempotencyKey != "" && !c.IdempotentSince.IsZero() {
		prev, err := scanRun(tx.queryRow(stmtFindRunByKey, r.SessionID, r.IdempotencyKey, micros(c.IdempotentSince)))
		switch {
		case err == nil:
			return &session.DuplicateRunError{Run: prev}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("create run %s: find idempotency key: %w", r.ID, err)
		}
	}
	if c.MaxQueued > 0 && r.State == session.RunQueued {
		var n int
		if err := tx.queryRow(stmtCountQueued, r.SessionID).Scan(&n); err != nil {
			return nil, fmt.Errorf("create run %s: count queued runs: %w", r.ID, err)
		}
		if n >= c.MaxQueued {
			return session.QueueFull(r.SessionID, c.MaxQueued), nil
		}
	}
	return nil, nil
}

// GetRun returns run runID of session sessionID.
func (s *Store) GetRun(ctx context.Context, sessionID, runID string) (session.Run, error) {
	rd, err := s.acquire(ctx)
	if err != nil {
		return session.Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	defer s.release(rd)
	ctx = brief(ctx)
	r, err := scanRun(rd.queryRow(ctx, `SELECT `+runColumns+` FROM runs
		WHERE session_id = ? AND id = ?`, sessionID, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return session.Run{}, rd.missingRun(ctx, sessionID, session.RunNotFound(runID))
	}
	if err != nil {
		return session.Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	return r, nil
}

// UpdateRun replaces the stored run with r if it is still at r.Version;
// see kernel.RunStore.
func (s *Store) UpdateRun(ctx context.Context, r session.Run) error {
	ext, err := encodeExt(r.RunExt)
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		return tx.updateRun(r, ext)
	})
}

// updateRun replaces the stored run with r if it is still at r.Version.
func (tx *batchTx) updateRun(r session.Run, ext any) (own, err error) {
	code, msg := runErrorArgs(r.Error)
	updated, err := tx.exec(stmtUpdateRun, string(r.State), r.Input, r.IdempotencyKey,
		micros(r.CreatedAt), nullMicros(r.StartedAt), nullMicros(r.EndedAt), code, msg,
		r.Usage.InputTokens, r.Usage.OutputTokens, r.StartSeq, r.EndSeq, ext, r.SessionID, r.ID, r.Version)
	if err != nil {
		return nil, fmt.Errorf("update run %s: %w", r.ID, err)
	}
	if updated {
		return nil, nil
	}
	var one int
	err = tx.queryRow(stmtRunExists, r.SessionID, r.ID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return tx.missingRun(r.SessionID, session.RunNotFound(r.ID))
	case err != nil:
		return nil, fmt.Errorf("update run %s: %w", r.ID, err)
	}
	return session.ErrStale, nil
}

// ListRuns returns a session's runs matching q, most recently created
// first: runs keep rowids in the order they were created.
func (s *Store) ListRuns(ctx context.Context, sessionID string, q session.RunQuery) ([]session.Run, error) {
	r, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs of session %s: %w", sessionID, err)
	}
	defer s.release(r)
	if len(q.States) > 0 || q.Limit > 0 {
		ctx = brief(ctx) // the kernel's: a session's few active runs, or a page
	}
	query, args := runsQuery(sessionID, q)
	runs, err := r.queryRuns(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs of session %s: %w", sessionID, err)
	}
	if len(runs) == 0 {
		if err := r.requireSession(ctx, sessionID); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// runsQuery builds the SELECT for ListRuns. Without states it walks
// runs_by_session, in rowid order within the session. With states it
// reads runs_by_session_state once per state, which for one state is in
// rowid order too, and for several sorts only the runs it found: the
// kernel asks for the states of runs still to run, which are few however
// long the session's history is, and a walk in rowid order would read
// that whole history to find none.
// A Before run that the session does not have lists nothing.
func runsQuery(sessionID string, q session.RunQuery) (string, []any) {
	query := `SELECT ` + runColumns + ` FROM runs WHERE session_id = ?`
	if len(q.States) > 0 {
		query = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_by_session_state WHERE session_id = ?`
	}
	args := []any{sessionID}
	if len(q.States) > 0 {
		query += ` AND state IN (` + strings.Repeat(", ?", len(q.States))[2:] + `)`
		for _, st := range q.States {
			args = append(args, string(st))
		}
	}
	if q.Before != "" {
		query += ` AND rowid < (SELECT rowid FROM runs WHERE session_id = ? AND id = ?)`
		args = append(args, sessionID, q.Before)
	}
	query += ` ORDER BY rowid DESC` + limitClause(q.Limit)
	return query, args
}

// findRunByKeySQL finds the newest run of a session with a key created at
// or after a time. It repeats the partial index's condition, a key that is
// not empty, so the planner can use the index and the empty key matches
// no run.
const findRunByKeySQL = `SELECT ` + runColumns + ` FROM runs
	WHERE session_id = ? AND idempotency_key = ? AND idempotency_key <> '' AND created_at >= ?
	ORDER BY rowid DESC LIMIT 1`

// FindRunByIdempotencyKey returns the newest run of the session created
// with key at or after since. An empty key matches no run: runs created
// without one must not be mistaken for each other.
func (s *Store) FindRunByIdempotencyKey(ctx context.Context, sessionID, key string, since time.Time) (session.Run, error) {
	rd, err := s.acquire(ctx)
	if err != nil {
		return session.Run{}, fmt.Errorf("find run of session %s by idempotency key: %w", sessionID, err)
	}
	defer s.release(rd)
	ctx = brief(ctx)
	r, err := scanRun(rd.queryRow(ctx, findRunByKeySQL, sessionID, key, micros(since)))
	if errors.Is(err, sql.ErrNoRows) {
		return session.Run{}, rd.missingRun(ctx, sessionID, errdefs.New(errdefs.ErrNotFound,
			errdefs.CodeRunNotFound, "no run of session %s with idempotency key %q", sessionID, key))
	}
	if err != nil {
		return session.Run{}, fmt.Errorf("find run of session %s by idempotency key: %w", sessionID, err)
	}
	return r, nil
}

// ListRunsByState returns every run in one of states, of any session,
// oldest first: by CreatedAt, then by id for runs created together.
func (s *Store) ListRunsByState(ctx context.Context, states ...session.RunState) ([]session.Run, error) {
	if len(states) == 0 {
		return nil, nil
	}
	args := make([]any, len(states))
	for i, st := range states {
		args[i] = string(st)
	}
	r, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs by state: %w", err)
	}
	defer s.release(r)
	marks := strings.Repeat(", ?", len(states))[2:]
	runs, err := r.queryRuns(ctx, `SELECT `+runColumns+` FROM runs WHERE state IN (`+marks+`)
		ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs by state: %w", err)
	}
	return runs, nil
}

// missingRun returns notFound if the session exists, or the session's own
// not-found error: a run of a missing session is reported as the session.
func (r *reader) missingRun(ctx context.Context, sessionID string, notFound error) error {
	if err := r.requireSession(ctx, sessionID); err != nil {
		return err
	}
	return notFound
}

// missingRun returns, for a write that found no run to change, the
// session's not-found error if the session is missing (as the batch has
// left it), else notFound; both as the call's own failure.
func (tx *batchTx) missingRun(sessionID string, notFound error) (own, err error) {
	if own, err := tx.requireSession(sessionID); own != nil || err != nil {
		return own, err
	}
	return notFound, nil
}

// queryRuns runs a SELECT of runColumns on r.
func (r *reader) queryRuns(ctx context.Context, query string, args ...any) ([]session.Run, error) {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var runs []session.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// runErrorArgs returns a run's error as its two columns, both NULL if
// the run has none.
func runErrorArgs(e *session.RunError) (code, msg any) {
	if e == nil {
		return nil, nil
	}
	return e.Code, e.Message
}

// scanRun reads one row of runColumns.
func scanRun(row scanner) (session.Run, error) {
	var r session.Run
	var created int64
	var started, ended sql.NullInt64
	var code, msg sql.NullString
	var ext []byte
	err := row.Scan(&r.SessionID, &r.ID, (*string)(&r.State), &r.Input, &r.IdempotencyKey, &created,
		&started, &ended, &code, &msg, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.StartSeq, &r.EndSeq,
		&r.Version, &ext)
	if err != nil {
		return session.Run{}, err
	}
	r.CreatedAt, r.StartedAt, r.EndedAt = fromMicros(created), fromNullMicros(started), fromNullMicros(ended)
	if code.Valid {
		r.Error = &session.RunError{Code: code.String, Message: msg.String}
	}
	if err := decodeExt(ext, &r.RunExt); err != nil {
		return session.Run{}, err
	}
	return r, nil
}
