package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// runColumns is the column list scanRun reads, in its order.
const runColumns = `session_id, id, state, input, idempotency_key, created_at, started_at,
	ended_at, error_code, error_message, input_tokens, output_tokens, start_seq, end_seq, version, ext`

const createRunSQL = `INSERT INTO runs (` + runColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
	ON CONFLICT (session_id, id) DO NOTHING`

// updateRunSQL replaces every column of a run but its keys, if it is still
// at the version it was read at.
const updateRunSQL = `UPDATE runs SET state = $1, input = $2, idempotency_key = $3, created_at = $4,
	started_at = $5, ended_at = $6, error_code = $7, error_message = $8, input_tokens = $9,
	output_tokens = $10, start_seq = $11, end_seq = $12, ext = $13, version = version + 1
	WHERE session_id = $14 AND id = $15 AND version = $16`

// findRunByKeySQL finds the newest run of a session with a key created at
// or after a time; the empty key matches no run.
const findRunByKeySQL = `SELECT ` + runColumns + ` FROM runs
	WHERE session_id = $1 AND idempotency_key = $2 AND idempotency_key <> '' AND created_at >= $3
	ORDER BY n DESC LIMIT 1`

// CreateRun stores a new run of an existing session, checking c with the
// session's row locked, so two runs created together with one key make
// one run; see kernel.RunStore.
func (s *Store) CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error {
	code, msg := runErrorArgs(r.Error)
	ext, err := encodeExt(r.RunExt)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockSession(ctx, tx, r.SessionID); err != nil {
			return err
		}
		// A taken id comes first: checkRun would answer a run created
		// again with its own key as a replay of itself.
		if err := runExists(ctx, tx, r.SessionID, r.ID); err == nil {
			return session.RunExists(r.ID)
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := checkRun(ctx, tx, r, c); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, createRunSQL, r.SessionID, r.ID, string(r.State), r.Input,
			r.IdempotencyKey, micros(r.CreatedAt), nullMicros(r.StartedAt), nullMicros(r.EndedAt),
			code, msg, r.Usage.InputTokens, r.Usage.OutputTokens, r.StartSeq, r.EndSeq, r.Version, ext)
		if err == nil && tag.RowsAffected() == 0 {
			return session.RunExists(r.ID)
		}
		return err
	})
	return wrapUnlessKnown(err, "create run %s", r.ID)
}

// runExists returns nil if the session has run id, pgx.ErrNoRows if not.
func runExists(ctx context.Context, q querier, sessionID, id string) error {
	var one int
	return q.QueryRow(ctx, `SELECT 1 FROM runs WHERE session_id = $1 AND id = $2`, sessionID, id).Scan(&one)
}

// checkRun applies a new run's constraints.
func checkRun(ctx context.Context, tx pgx.Tx, r session.Run, c session.RunConstraints) error {
	if r.IdempotencyKey != "" && !c.IdempotentSince.IsZero() {
		prev, err := scanRun(tx.QueryRow(ctx, findRunByKeySQL, r.SessionID, r.IdempotencyKey, micros(c.IdempotentSince)))
		switch {
		case err == nil:
			return &session.DuplicateRunError{Run: prev}
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("find idempotency key: %w", err)
		}
	}
	if c.MaxQueued > 0 && r.State == session.RunQueued {
		var n int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM runs WHERE session_id = $1 AND state = $2`,
			r.SessionID, string(session.RunQueued)).Scan(&n)
		if err != nil {
			return fmt.Errorf("count queued runs: %w", err)
		}
		if n >= c.MaxQueued {
			return session.QueueFull(r.SessionID, c.MaxQueued)
		}
	}
	return nil
}

// GetRun returns run runID of session sessionID.
func (s *Store) GetRun(ctx context.Context, sessionID, runID string) (session.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs
		WHERE session_id = $1 AND id = $2`, sessionID, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Run{}, s.missing(ctx, sessionID, session.RunNotFound(runID))
	}
	if err != nil {
		return session.Run{}, fmt.Errorf("get run %s: %w", runID, unavailable(ctx, err))
	}
	return r, nil
}

// UpdateRun replaces the stored run with r if it is still at r.Version.
func (s *Store) UpdateRun(ctx context.Context, r session.Run) error {
	code, msg := runErrorArgs(r.Error)
	ext, err := encodeExt(r.RunExt)
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	tag, err := s.pool.Exec(ctx, updateRunSQL, string(r.State), r.Input, r.IdempotencyKey,
		micros(r.CreatedAt), nullMicros(r.StartedAt), nullMicros(r.EndedAt), code, msg,
		r.Usage.InputTokens, r.Usage.OutputTokens, r.StartSeq, r.EndSeq, ext, r.SessionID, r.ID, r.Version)
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, unavailable(ctx, err))
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	switch err := runExists(ctx, s.pool, r.SessionID, r.ID); {
	case errors.Is(err, pgx.ErrNoRows):
		return s.missing(ctx, r.SessionID, session.RunNotFound(r.ID))
	case err != nil:
		return fmt.Errorf("update run %s: %w", r.ID, unavailable(ctx, err))
	}
	return session.ErrStale
}

// ListRuns returns a session's runs matching q, most recently created
// first.
func (s *Store) ListRuns(ctx context.Context, sessionID string, q session.RunQuery) ([]session.Run, error) {
	var a args
	query := `SELECT ` + runColumns + ` FROM runs WHERE session_id = ` + a.add(sessionID)
	if len(q.States) > 0 {
		states := make([]string, len(q.States))
		for i, st := range q.States {
			states[i] = string(st)
		}
		query += ` AND state = ANY(` + a.add(states) + `)`
	}
	if q.Before != "" {
		// A Before run the session does not have lists nothing.
		query += ` AND n < (SELECT n FROM runs WHERE session_id = $1 AND id = ` + a.add(q.Before) + `)`
	}
	query += ` ORDER BY n DESC LIMIT ` + a.add(limitArg(q.Limit))
	runs, err := s.queryRuns(ctx, query, a...)
	if err != nil {
		return nil, fmt.Errorf("list runs of session %s: %w", sessionID, err)
	}
	if len(runs) == 0 {
		return nil, s.missing(ctx, sessionID, nil)
	}
	return runs, nil
}

// FindRunByIdempotencyKey returns the newest run of the session created
// with key at or after since. An empty key matches no run.
func (s *Store) FindRunByIdempotencyKey(ctx context.Context, sessionID, key string, since time.Time) (session.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, findRunByKeySQL, sessionID, key, micros(since)))
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Run{}, s.missing(ctx, sessionID, errdefs.New(errdefs.ErrNotFound,
			errdefs.CodeRunNotFound, "no run of session %s with idempotency key %q", sessionID, key))
	}
	if err != nil {
		return session.Run{}, fmt.Errorf("find run of session %s by idempotency key: %w", sessionID, unavailable(ctx, err))
	}
	return r, nil
}

// ListRunsByState returns every run in one of states, of any session,
// oldest first: by CreatedAt, then by id.
func (s *Store) ListRunsByState(ctx context.Context, states ...session.RunState) ([]session.Run, error) {
	if len(states) == 0 {
		return nil, nil
	}
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	runs, err := s.queryRuns(ctx, `SELECT `+runColumns+` FROM runs WHERE state = ANY($1)
		ORDER BY created_at, id`, names)
	if err != nil {
		return nil, fmt.Errorf("list runs by state: %w", err)
	}
	return runs, nil
}

// missing returns session sessionID's not-found error if it is missing,
// else notFound: a run or key of a missing session is reported as the
// session.
func (s *Store) missing(ctx context.Context, sessionID string, notFound error) error {
	if err := requireSession(ctx, s.pool, sessionID); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		return fmt.Errorf("look up session %s: %w", sessionID, unavailable(ctx, err))
	}
	return notFound
}

// queryRuns runs a SELECT of runColumns.
func (s *Store) queryRuns(ctx context.Context, query string, a ...any) ([]session.Run, error) {
	rows, err := s.pool.Query(ctx, query, a...)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (session.Run, error) { return scanRun(row) })
	return runs, unavailable(ctx, err)
}

// runErrorArgs returns a run's error as its two columns, both NULL if
// the run has none.
func runErrorArgs(e *session.RunError) (code, msg *string) {
	if e == nil {
		return nil, nil
	}
	return &e.Code, &e.Message
}

// scanRun reads one row of runColumns.
func scanRun(row pgx.Row) (session.Run, error) {
	var r session.Run
	var created int64
	var started, ended *int64
	var code, msg, ext *string
	err := row.Scan(&r.SessionID, &r.ID, (*string)(&r.State), &r.Input, &r.IdempotencyKey, &created,
		&started, &ended, &code, &msg, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.StartSeq, &r.EndSeq,
		&r.Version, &ext)
	if err != nil {
		return session.Run{}, err
	}
	r.CreatedAt, r.StartedAt, r.EndedAt = fromMicros(created), fromNullMicros(started), fromNullMicros(ended)
	if code != nil {
		r.Error = &session.RunError{Code: *code}
		if msg != nil {
			r.Error.Message = *msg
		}
	}
	if err := decodeJSON(ext, &r.RunExt, "ext"); err != nil {
		return session.Run{}, err
	}
	return r, nil
}
