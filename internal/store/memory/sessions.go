package memory

import (
	"context"
	"errors"
	"maps"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// CreateSession stores a new session; an existing id is ErrConflict. The
// new session's LastSeq is 0 whatever sess says: only AppendEvents
// moves it, and the log holds exactly LastSeq events.
func (s *Store) CreateSession(ctx context.Context, sess session.Session) error {
	rec := &record{sess: sess.Clone(), key: session.Cursor{CreatedAt: sess.CreatedAt, ID: sess.ID}}
	rec.sess.LastSeq = 0
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess.ID]; ok {
		return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionExists, "session %s already exists", sess.ID)
	}
	s.sessions[sess.ID] = rec
	s.index(rec, rec.sess.Metadata)
	return nil
}

// GetSession returns the session with id.
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	var out session.Session
	err := s.read(id, func(rec *record) error {
		out = rec.sess.Clone()
		return nil
	})
	return out, err
}

// UpdateSession replaces the stored session with sess, keeping its
// LastSeq, if it is still at sess.Version; see kernel.SessionStore.
func (s *Store) UpdateSession(ctx context.Context, sess session.Session) error {
	err := s.write(sess.ID, func(rec *record) error {
		if !sess.CreatedAt.Equal(rec.key.CreatedAt) || !maps.Equal(sess.Metadata, rec.sess.Metadata) {
			return errMoved
		}
		return rec.update(sess)
	})
	if errors.Is(err, errMoved) {
		return s.updateMoved(sess)
	}
	return err
}

// errMoved tells UpdateSession that the update moves the session in
// s.order or in the metadata index, which needs the store's lock too.
var errMoved = errors.New("session moves in the listing")

// updateMoved is UpdateSession for an update that changes CreatedAt or
// Metadata, and with them the session's place in s.order or the metadata
// index: it holds the store's lock, then the record's.
func (s *Store) updateMoved(sess session.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.sessions[sess.ID]
	if rec == nil {
		return session.SessionNotFound(sess.ID)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	old := rec.sess.Metadata
	if err := rec.update(sess); err != nil {
		return err
	}
	s.unindex(rec, old)
	rec.key.CreatedAt = sess.CreatedAt
	s.index(rec, rec.sess.Metadata)
	return nil
}

// update replaces the record's session with sess under the version rule.
// The record's lock is held.
func (rec *record) update(sess session.Session) error {
	if rec.sess.Version != sess.Version {
		return session.ErrStale
	}
	lastSeq := rec.sess.LastSeq
	rec.sess = sess.Clone()
	rec.sess.LastSeq = lastSeq
	rec.sess.Version++
	return nil
}

// DeleteSession removes the session with everything it owns. Children are
// separate records and stay as they are.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	s.mu.Lock()
	rec := s.sessions[id]
	if rec == nil {
		s.mu.Unlock()
		return session.SessionNotFound(id)
	}
	delete(s.sessions, id)
	rec.mu.RLock() // the store's lock first, as everywhere
	s.unindex(rec, rec.sess.Metadata)
	rec.mu.RUnlock()
	s.mu.Unlock()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.deleted = true
	// Drop the data now rather than when the last stale pointer goes.
	rec.runs, rec.runAt, rec.msgs, rec.memory, rec.pages, rec.arena = nil, nil, nil, nil, nil, nil
	return nil
}

// ListSessions returns the sessions matching q, newest first. A metadata
// filter reads the sessions under its least common entry only.
func (s *Store) ListSessions(ctx context.Context, q session.Query) ([]session.Session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.candidates(q)
	end := len(list)
	if q.After != nil {
		end, _ = placeIn(list, *q.After)
	}
	var out []session.Session
	for i := end - 1; i >= 0 && (q.Limit <= 0 || len(out) < q.Limit); i-- {
		if sess, ok := list[i].match(q); ok {
			out = append(out, sess)
		}
	}
	return out, nil
}

// match returns a copy of the record's session if it satisfies q's filters.
func (rec *record) match(q session.Query) (session.Session, bool) {
	rec.mu.RLock()
	defer rec.mu.RUnlock()
	if !q.Matches(&rec.sess) {
		return session.Session{}, false
	}
	return rec.sess.Clone(), true
}

// CountSessions returns how many sessions tenant has stored.
func (s *Store) CountSessions(_ context.Context, tenant string) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, rec := range s.order {
		rec.mu.RLock()
		if rec.sess.Tenant == tenant {
			n++
		}
		rec.mu.RUnlock()
	}
	return n, nil
}
