package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// sessionColumns is the column list scanSession reads, in its order.
const sessionColumns = `id, tenant, agent, name, metadata, state, parent_id, root_id, depth,
	created_at, updated_at, ttl, expires_at, last_seq, active_run_id, inherit_memory, forked_from,
	version, ext`

// createSessionSQL inserts a session unless its id is taken.
const createSessionSQL = `INSERT INTO sessions (` + sessionColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`

// updateSessionSQL replaces every column of a session but its id and
// last_seq, if it is still at the version it was read at, and moves its
// version on.
const updateSessionSQL = `UPDATE sessions SET tenant = ?, agent = ?, name = ?, metadata = ?,
	state = ?, parent_id = ?, root_id = ?, depth = ?, created_at = ?, updated_at = ?, ttl = ?,
	expires_at = ?, active_run_id = ?, inherit_memory = ?, forked_from = ?, ext = ?,
	version = version + 1 WHERE id = ? AND version = ?`

// The statements that keep session_metadata in step with sessions.metadata.
const (
	clearMetadataSQL  = `DELETE FROM session_metadata WHERE session_id = ?`
	insertMetadataSQL = `INSERT INTO session_metadata (session_id, key, value, created_at) VALUES (?, ?, ?, ?)`
)

// CreateSession stores a new session; an existing id is ErrConflict. The
// new session's LastSeq is 0 whatever sess says: only AppendEvents moves
// it, and the log holds exactly LastSeq events.
func (s *Store) CreateSession(ctx context.Context, sess session.Session) error {
	meta, ext, err := sessionDocs(sess)
	if err != nil {
		return fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		created, err := tx.exec(stmtCreateSession, sess.ID, sess.Tenant, sess.Agent, sess.Name, meta,
			string(sess.State), sess.ParentID, sess.RootID, sess.Depth, micros(sess.CreatedAt),
			micros(sess.UpdatedAt), int64(sess.TTL), nullMicros(sess.ExpiresAt), sess.ActiveRunID,
			sess.InheritMemory, sess.ForkedFrom, sess.Version, ext)
		if err != nil {
			return nil, fmt.Errorf("create session %s: %w", sess.ID, err)
		}
		if !created {
			return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionExists, "session %s already exists", sess.ID), nil
		}
		tx.created(sess.ID)
		return nil, tx.indexMetadata(sess, false)
	})
}

// sessionDocs returns a session's metadata and ext columns.
func sessionDocs(sess session.Session) (meta, ext any, err error) {
	if meta, err = encodeMetadata(sess.Metadata); err != nil {
		return nil, nil, err
	}
	ext, err = encodeExt(sess.SessionExt)
	return meta, ext, err
}

// indexMetadata writes a session's metadata entries, with its creation
// time, into session_metadata, replacing those it had when replace is set.
func (tx *batchTx) indexMetadata(sess session.Session, replace bool) error {
	if replace {
		if _, err := tx.exec(stmtClearMetadata, sess.ID); err != nil {
			return fmt.Errorf("index metadata of session %s: %w", sess.ID, err)
		}
	}
	for k, v := range sess.Metadata {
		if _, err := tx.exec(stmtInsertMetadata, sess.ID, k, v, micros(sess.CreatedAt)); err != nil {
			return fmt.Errorf("index metadata of session %s: %w", sess.ID, err)
		}
	}
	return nil
}

// GetSession returns the session with id.
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	r, err := s.acquire(ctx)
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	defer s.release(r)
	sess, err := scanSession(r.queryRow(brief(ctx), `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return session.Session{}, session.SessionNotFound(id)
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", id, err)
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
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		return tx.updateSession(sess, meta, ext)
	})
}

// updateSession replaces the stored session with sess, keeping its
// LastSeq, if it is still at sess.Version.
func (tx *batchTx) updateSession(sess session.Session, meta, ext any) (own, err error) {
	updated, err := tx.exec(stmtUpdateSession, sess.Tenant, sess.Agent, sess.Name, meta,
		string(sess.State), sess.ParentID, sess.RootID, sess.Depth, micros(sess.CreatedAt),
		micros(sess.UpdatedAt), int64(sess.TTL), nullMicros(sess.ExpiresAt), sess.ActiveRunID,
		sess.InheritMemory, sess.ForkedFrom, ext, sess.ID, sess.Version)
	if err != nil {
		return nil, fmt.Errorf("update session %s: %w", sess.ID, err)
	}
	if !updated {
		if own, err := tx.requireSession(sess.ID); own != nil || err != nil {
			return own, err
		}
		return session.ErrStale, nil
	}
	return nil, tx.indexMetadata(sess, true)
}

// DeleteSession removes the session with everything it owns; the foreign
// keys cascade. Children are sessions of their own and stay.
//
// Its lease goes with it twice: in the batch, so that later appends of
// the batch are fenced as well as not found, and again once the delete
// has committed, for an AcquireLease that looked the session up before
// the commit (see AcquireLease).
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *batchTx) (own, err error) {
		// Events of the session queued earlier in the batch go first, so
		// the cascade takes them too.
		if err := tx.flushEvents(); err != nil {
			return nil, err
		}
		deleted, err := tx.exec(stmtDeleteSession, id)
		if err != nil {
			return nil, fmt.Errorf("delete session %s: %w", id, err)
		}
		if !deleted {
			return session.SessionNotFound(id), nil
		}
		tx.deleted(id)
		s.leases.forget(id)
		return nil, nil
	})
	if err == nil {
		s.leases.forget(id)
	}
	return err
}

// ListSessions returns the sessions matching q, newest first (see
// session.Query).
func (s *Store) ListSessions(ctx context.Context, q session.Query) ([]session.Session, error) {
	r, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer s.release(r)
	lead, err := r.leadEntry(ctx, q.Metadata)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	query, args := sessionQueryLed(q, lead)
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var out []session.Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// sessionQuery builds the SELECT for q. Every listing walks an index in
// the listing's order, (created_at, id) newest first, and stops at its
// page: the planner picks that index from the filters, except for
// metadata, which sessionsByMetadata drives itself.
func sessionQuery(q session.Query) (string, []any) {
	return sessionQueryLed(q, "")
}

// sessionQueryLed is sessionQuery walking the index of metadata key lead,
// or of q's first key when lead is "".
func sessionQueryLed(q session.Query, lead string) (string, []any) {
	if len(q.Metadata) > 0 {
		return sessionsByMetadata(q, lead)
	}
	where, args := sessionFilters(q, "", nil)
	var b strings.Builder
	b.WriteString(`SELECT ` + sessionColumns + ` FROM sessions`)
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY created_at DESC, id DESC")
	return withLimit(&b, q, args)
}

// sessionsByMetadata builds the SELECT for a q with metadata: it walks
// the index of one of q's entries, which session_metadata keeps in
// listing order, joining each entry's session and checking the other
// filters on it. CROSS JOIN makes SQLite keep that order of the tables
// whatever its statistics say: sessions first, by the tenant's index,
// would read every session of the tenant to find a user's few.
func sessionsByMetadata(q session.Query, lead string) (string, []any) {
	keys := slices.Sorted(maps.Keys(q.Metadata))
	if _, ok := q.Metadata[lead]; !ok {
		lead = keys[0]
	}
	rest := make(map[string]string, len(keys)-1)
	for _, k := range keys {
		if k != lead {
			rest[k] = q.Metadata[k]
		}
	}
	where := []string{"m.key = ?", "m.value = ?"}
	args := []any{lead, q.Metadata[lead]}
	if q.After != nil {
		where = append(where, "(m.created_at, m.session_id) < (?, ?)")
		args = append(args, micros(q.After.CreatedAt), q.After.ID)
	}
	if !q.CreatedAfter.IsZero() {
		where = append(where, "m.created_at > ?")
		args = append(args, micros(q.CreatedAfter))
	}
	if !q.CreatedBefore.IsZero() {
		where = append(where, "m.created_at < ?")
		args = append(args, microsAbove(q.CreatedBefore))
	}
	// The session's own bounds are left to the entry's, its copy.
	q.After, q.CreatedAfter, q.CreatedBefore = nil, time.Time{}, time.Time{}
	more, moreArgs := sessionFilters(q, "s.", rest)
	var b strings.Builder
	b.WriteString(`SELECT ` + qualifiedSessionColumns + ` FROM session_metadata AS m
		CROSS JOIN sessions AS s ON s.id = m.session_id WHERE `)
	b.WriteString(strings.Join(append(where, more...), " AND "))
	b.WriteString(" ORDER BY m.created_at DESC, m.session_id DESC")
	return withLimit(&b, q, append(args, moreArgs...))
}

// qualifiedSessionColumns is sessionColumns of the table named s.
var qualifiedSessionColumns = "s." + strings.Join(strings.Fields(strings.ReplaceAll(sessionColumns, ",", " ")), ", s.")

// withLimit ends the SELECT in b with q's limit and returns it with args.
func withLimit(b *strings.Builder, q session.Query, args []any) (string, []any) {
	b.WriteString(limitClause(q.Limit))
	return b.String(), args
}

// sessionFilters returns the conditions, on the columns of the sessions
// table named by prefix, for the filters q sets and only those, so that
// the planner can pick the index that serves them. Metadata entries are
// those of md rather than q's.
func sessionFilters(q session.Query, prefix string, md map[string]string) (where []string, args []any) {
	add := func(cond string, arg any) {
		where = append(where, strings.ReplaceAll(cond, "$", prefix))
		args = append(args, arg)
	}
	if q.Tenant != "" {
		add("$tenant = ?", q.Tenant)
	}
	if q.Agent != "" {
		add("$agent = ?", q.Agent)
	}
	if q.State != "" {
		add("$state = ?", string(q.State))
	}
	if q.ParentID != "" {
		// The repeated condition lets the planner use the partial index.
		add("$parent_id = ? AND $parent_id <> ''", q.ParentID)
	}
	if q.ForkedFrom != "" {
		add("$forked_from = ? AND $forked_from <> ''", q.ForkedFrom)
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		// A primary-key lookup in session_metadata per session.
		add("EXISTS (SELECT 1 FROM session_metadata WHERE session_id = $id AND key = ? AND value = ?)", k)
		args = append(args, md[k])
	}
	if q.After != nil {
		add("($created_at, $id) < (?, ?)", micros(q.After.CreatedAt))
		args = append(args, q.After.ID)
	}
	if !q.CreatedAfter.IsZero() {
		add("$created_at > ?", micros(q.CreatedAfter))
	}
	if !q.CreatedBefore.IsZero() {
		add("$created_at < ?", microsAbove(q.CreatedBefore))
	}
	if q.Search != "" {
		// Written out: add would take the $ of the JSON path for a prefix.
		// lower() folds ASCII only, as session.Query.Matches does.
		where = append(where, "(instr(lower("+prefix+"name), lower(?)) > 0 OR instr(lower(COALESCE(json_extract("+
			prefix+"ext, '$.title'), '')), lower(?)) > 0)")
		args = append(args, q.Search, q.Search)
	}
	// unlikely() tells the planner these ranges select few sessions, so it
	// uses their indexes rather than scanning in listing order to skip a
	// sort.
	if !q.ExpiresBefore.IsZero() {
		add("unlikely($expires_at < ?)", microsAbove(q.ExpiresBefore)) // NULL, never expiring, fails it
	}
	if !q.UpdatedBefore.IsZero() {
		add("unlikely($updated_at < ?)", microsAbove(q.UpdatedBefore))
	}
	return where, args
}

// scanSession reads one row of sessionColumns.
func scanSession(row scanner) (session.Session, error) {
	var sess session.Session
	var meta, ext []byte
	var created, updated int64
	var expires sql.NullInt64
	err := row.Scan(&sess.ID, &sess.Tenant, &sess.Agent, &sess.Name, &meta, (*string)(&sess.State),
		&sess.ParentID, &sess.RootID, &sess.Depth, &created, &updated, (*int64)(&sess.TTL), &expires,
		&sess.LastSeq, &sess.ActiveRunID, &sess.InheritMemory, &sess.ForkedFrom, &sess.Version, &ext)
	if err != nil {
		return session.Session{}, err
	}
	if sess.Metadata, err = decodeMetadata(meta); err != nil {
		return session.Session{}, err
	}
	if err := decodeExt(ext, &sess.SessionExt); err != nil {
		return session.Session{}, err
	}
	sess.CreatedAt, sess.UpdatedAt = fromMicros(created), fromMicros(updated)
	sess.ExpiresAt = fromNullMicros(expires)
	return sess, nil
}

// CountSessions returns how many sessions tenant has stored; the index
// sessions_by_tenant answers it.
func (s *Store) CountSessions(ctx context.Context, tenant string) (int, error) {
	r, err := s.acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	defer s.release(r)
	var n int
	if err := r.queryRow(ctx, `SELECT COUNT(*) FROM sessions WHERE tenant = ?`, tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// leadCount is how many entries leadEntry counts at most per metadata
// entry: enough to tell a rare entry from a common one, few enough to
// cost a fraction of the page.
const leadCount = 2000

// leadEntry returns the key of md whose entry fewest sessions hold, as far
// as counting up to leadCount of each tells, for sessionsByMetadata to
// walk: walking a common entry's index to find the sessions also holding
// a rare one reads many sessions per page (measured at 100,000 sessions,
// a 1-in-2 entry with a 1-in-100 one: 33 ms a page led by the first, 1 ms
// by the second). One entry needs no count.
func (r *reader) leadEntry(ctx context.Context, md map[string]string) (string, error) {
	if len(md) < 2 {
		return "", nil
	}
	lead, fewest := "", int64(-1)
	for _, k := range slices.Sorted(maps.Keys(md)) {
		var n int64
		err := r.queryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM session_metadata
			WHERE key = ? AND value = ?`+limitClause(leadCount)+`)`, k, md[k]).Scan(&n)
		if err != nil {
			return "", err
		}
		if fewest < 0 || n < fewest {
			lead, fewest = k, n
		}
	}
	return lead, nil
}
