package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// sessionColumns is the column list scanSession reads, in its order.
const sessionColumns = `id, tenant, agent, name, metadata, state, parent_id, root_id, depth,
	created_at, updated_at, ttl, expires_at, last_seq, active_run_id, inherit_memory, forked_from,
	version, ext`

const createSessionSQL = `INSERT INTO sessions (` + sessionColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 0, $14, $15, $16, $17, $18)
	ON CONFLICT (id) DO NOTHING`

// updateSessionSQL replaces every column of a session but its id and
// last_seq, if it is still at the version it was read at.
const updateSessionSQL = `UPDATE sessions SET tenant = $1, agent = $2, name = $3, metadata = $4,
	state = $5, parent_id = $6, root_id = $7, depth = $8, created_at = $9, updated_at = $10, ttl = $11,
	expires_at = $12, active_run_id = $13, inherit_memory = $14, forked_from = $15, ext = $16,
	version = version + 1 WHERE id = $17 AND version = $18`

// sessionDocs returns a session's metadata and ext columns.
func sessionDocs(sess session.Session) (meta, ext *string, err error) {
	if meta, err = encodeJSON(sess.Metadata, len(sess.Metadata) == 0, "metadata"); err != nil {
		return nil, nil, err
	}
	ext, err = encodeExt(sess.SessionExt)
	return meta, ext, err
}

// CreateSession stores a new session; an existing id is ErrConflict. Its
// LastSeq is 0 whatever sess says: only AppendEvents moves it.
func (s *Store) CreateSession(ctx context.Context, sess session.Session) error {
	meta, ext, err := sessionDocs(sess)
	if err != nil {
		return fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, createSessionSQL, sess.ID, sess.Tenant, sess.Agent, sess.Name, meta,
			string(sess.State), sess.ParentID, sess.RootID, sess.Depth, micros(sess.CreatedAt),
			micros(sess.UpdatedAt), int64(sess.TTL), nullMicros(sess.ExpiresAt), sess.ActiveRunID,
			sess.InheritMemory, sess.ForkedFrom, sess.Version, ext)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionExists, "session %s already exists", sess.ID)
		}
		return indexMetadata(ctx, tx, sess, false)
	})
	if err != nil && !errors.Is(err, errdefs.ErrConflict) {
		return fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	return err
}

// indexMetadata writes a session's metadata entries into
// session_metadata, replacing those it had when replace is set.
func indexMetadata(ctx context.Context, tx pgx.Tx, sess session.Session, replace bool) error {
	if replace {
		if _, err := tx.Exec(ctx, `DELETE FROM session_metadata WHERE session_id = $1`, sess.ID); err != nil {
			return err
		}
	}
	if len(sess.Metadata) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(sess.Metadata))
	values := make([]string, len(keys))
	for i, k := range keys {
		values[i] = sess.Metadata[k]
	}
	_, err := tx.Exec(ctx, `INSERT INTO session_metadata (session_id, key, value, created_at)
		SELECT $1, k, v, $4 FROM unnest($2::text[], $3::text[]) AS m(k, v)`,
		sess.ID, keys, values, micros(sess.CreatedAt))
	return err
}

// GetSession returns the session with id.
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Session{}, session.SessionNotFound(id)
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", id, unavailable(ctx, err))
	}
	return sess, nil
}

// UpdateSession replaces the stored session with sess, keeping its
// LastSeq, if it is still at sess.Version; see kernel.SessionStore.
func (s *Store) UpdateSession(ctx context.Context, sess session.Session) error {
	meta, ext, err := sessionDocs(sess)
	if err != nil {
		return fmt.Errorf("update session %s: %w", sess.ID, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, updateSessionSQL, sess.Tenant, sess.Agent, sess.Name, meta,
			string(sess.State), sess.ParentID, sess.RootID, sess.Depth, micros(sess.CreatedAt),
			micros(sess.UpdatedAt), int64(sess.TTL), nullMicros(sess.ExpiresAt), sess.ActiveRunID,
			sess.InheritMemory, sess.ForkedFrom, ext, sess.ID, sess.Version)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			if err := requireSession(ctx, tx, sess.ID); err != nil {
				return err
			}
			return session.ErrStale
		}
		return indexMetadata(ctx, tx, sess, true)
	})
	return wrapUnlessKnown(err, "update session %s", sess.ID)
}

// DeleteSession removes the session with everything it owns, its lease
// too; the foreign keys cascade. Children are sessions of their own.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, unavailable(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return session.SessionNotFound(id)
	}
	return nil
}

// ListSessions returns the sessions matching q, newest first.
func (s *Store) ListSessions(ctx context.Context, q session.Query) ([]session.Session, error) {
	query, a := sessionQuery(q)
	rows, err := s.pool.Query(ctx, query, a...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", unavailable(ctx, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (session.Session, error) { return scanSession(row) })
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", unavailable(ctx, err))
	}
	return out, nil
}

// sessionQuery builds the SELECT for q. Without metadata it walks the
// index of the filters it sets in listing order; with metadata it walks
// the index of q's first entry (session_metadata keeps each entry's
// session's created_at) and checks the rest on each session.
func sessionQuery(q session.Query) (string, []any) {
	var a args
	var b strings.Builder
	if len(q.Metadata) == 0 {
		where := sessionFilters(q, "", nil, &a)
		b.WriteString(`SELECT ` + sessionColumns + ` FROM sessions`)
		if len(where) > 0 {
			b.WriteString(" WHERE " + strings.Join(where, " AND "))
		}
		b.WriteString(" ORDER BY created_at DESC, id DESC")
	} else {
		keys := slices.Sorted(maps.Keys(q.Metadata))
		lead := keys[0]
		rest := maps.Clone(q.Metadata)
		delete(rest, lead)
		where := []string{"m.key = " + a.add(lead), "m.value = " + a.add(q.Metadata[lead])}
		if q.After != nil {
			where = append(where, fmt.Sprintf("(m.created_at, m.session_id) < (%s, %s)",
				a.add(micros(q.After.CreatedAt)), a.add(q.After.ID)))
		}
		if !q.CreatedAfter.IsZero() {
			where = append(where, "m.created_at > "+a.add(micros(q.CreatedAfter)))
		}
		if !q.CreatedBefore.IsZero() {
			where = append(where, "m.created_at < "+a.add(microsAbove(q.CreatedBefore)))
		}
		// The session's own bounds are left to the entry's, its copy.
		q.After, q.CreatedAfter, q.CreatedBefore = nil, time.Time{}, time.Time{}
		where = append(where, sessionFilters(q, "s.", rest, &a)...)
		b.WriteString(`SELECT ` + qualifiedSessionColumns + ` FROM session_metadata AS m
			JOIN sessions AS s ON s.id = m.session_id WHERE `)
		b.WriteString(strings.Join(where, " AND "))
		b.WriteString(" ORDER BY m.created_at DESC, m.session_id DESC")
	}
	if q.Limit > 0 {
		b.WriteString(" LIMIT " + a.add(int64(q.Limit)))
	}
	return b.String(), a
}

// qualifiedSessionColumns is sessionColumns of the table named s.
var qualifiedSessionColumns = "s." + strings.Join(strings.Fields(strings.ReplaceAll(sessionColumns, ",", " ")), ", s.")

// sessionFilters returns the conditions, on the columns of the sessions
// table named by prefix, for the filters q sets; md replaces q's metadata.
func sessionFilters(q session.Query, prefix string, md map[string]string, a *args) []string {
	var where []string
	add := func(cond string) { where = append(where, strings.ReplaceAll(cond, "$.", prefix)) }
	if q.Tenant != "" {
		add("$.tenant = " + a.add(q.Tenant))
	}
	if q.Agent != "" {
		add("$.agent = " + a.add(q.Agent))
	}
	if q.State != "" {
		add("$.state = " + a.add(string(q.State)))
	}
	if q.ParentID != "" {
		add("$.parent_id = " + a.add(q.ParentID) + " AND $.parent_id <> ''")
	}
	if q.ForkedFrom != "" {
		add("$.forked_from = " + a.add(q.ForkedFrom) + " AND $.forked_from <> ''")
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		add("EXISTS (SELECT 1 FROM session_metadata WHERE session_id = $.id AND key = " + a.add(k) +
			" AND value = " + a.add(md[k]) + ")")
	}
	if q.After != nil {
		add(fmt.Sprintf("($.created_at, $.id) < (%s, %s)", a.add(micros(q.After.CreatedAt)), a.add(q.After.ID)))
	}
	if !q.CreatedAfter.IsZero() {
		add("$.created_at > " + a.add(micros(q.CreatedAfter)))
	}
	if !q.CreatedBefore.IsZero() {
		add("$.created_at < " + a.add(microsAbove(q.CreatedBefore)))
	}
	if q.Search != "" {
		// ASCII letters only are folded, as session.Query.Matches does.
		fold := func(x string) string {
			return "translate(" + x + ", 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
		}
		needle := fold(a.add(q.Search))
		add("(strpos(" + fold("$.name") + ", " + needle + ") > 0 OR strpos(" +
			fold("COALESCE($.ext::jsonb ->> 'title', '')") + ", " + needle + ") > 0)")
	}
	if !q.ExpiresBefore.IsZero() {
		add("$.expires_at < " + a.add(microsAbove(q.ExpiresBefore))) // NULL, never expiring, fails it
	}
	if !q.UpdatedBefore.IsZero() {
		add("$.updated_at < " + a.add(microsAbove(q.UpdatedBefore)))
	}
	return where
}

// scanSession reads one row of sessionColumns.
func scanSession(row pgx.Row) (session.Session, error) {
	var sess session.Session
	var meta, ext *string
	var created, updated, ttl int64
	var expires *int64
	err := row.Scan(&sess.ID, &sess.Tenant, &sess.Agent, &sess.Name, &meta, (*string)(&sess.State),
		&sess.ParentID, &sess.RootID, &sess.Depth, &created, &updated, &ttl, &expires,
		&sess.LastSeq, &sess.ActiveRunID, &sess.InheritMemory, &sess.ForkedFrom, &sess.Version, &ext)
	if err != nil {
		return session.Session{}, err
	}
	if err := decodeJSON(meta, &sess.Metadata, "metadata"); err != nil {
		return session.Session{}, err
	}
	if err := decodeJSON(ext, &sess.SessionExt, "ext"); err != nil {
		return session.Session{}, err
	}
	sess.TTL = time.Duration(ttl)
	sess.CreatedAt, sess.UpdatedAt = fromMicros(created), fromMicros(updated)
	sess.ExpiresAt = fromNullMicros(expires)
	return sess, nil
}

// CountSessions returns how many sessions tenant has stored; the index
// sessions_by_tenant answers it.
func (s *Store) CountSessions(ctx context.Context, tenant string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE tenant = $1`, tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sessions: %w", unavailable(ctx, err))
	}
	return n, nil
}

// requireSession returns nil if session id exists, its not-found error
// if it does not.
func requireSession(ctx context.Context, q querier, id string) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.SessionNotFound(id)
	}
	return err
}

// lockSession locks session id's row for the rest of tx, so that the
// checks of the session's writes see each other, or returns its
// not-found error.
func lockSession(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.SessionNotFound(id)
	}
	return err
}

// querier is a pool, a connection or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// wrapUnlessKnown returns err as it is when it is one of the kinds the
// store answers with (not found, conflict, stale…), else with what was
// being done.
func wrapUnlessKnown(err error, format string, a ...any) error {
	if err == nil || known(err) {
		return err
	}
	return fmt.Errorf(format+": %w", append(a, err)...)
}

// known reports whether err is an answer rather than a failure.
func known(err error) bool {
	for _, kind := range []error{errdefs.ErrNotFound, errdefs.ErrConflict, errdefs.ErrExhausted,
		errdefs.ErrInvalid, session.ErrStale, session.ErrFenced, session.ErrLeaseHeld} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}
