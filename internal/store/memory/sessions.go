package memory

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

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
		return errdefs.New(errdefs.ErrConflict, "session_exists", "session %s already exists", sess.ID)
	}
	s.sessions[sess.ID] = rec
	i, _ := s.place(rec.key)
	s.order = slices.Insert(s.order, i, rec)
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
		if !sess.CreatedAt.Equal(rec.key.CreatedAt) {
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
// s.order, which needs the store's lock too.
var errMoved = errors.New("session moves in the listing")

// updateMoved is UpdateSession for an update that changes CreatedAt, and
// with it the session's place in s.order: it holds the store's lock, then
// the record's.
func (s *Store) updateMoved(sess session.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.sessions[sess.ID]
	if rec == nil {
		return session.SessionNotFound(sess.ID)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err := rec.update(sess); err != nil {
		return err
	}
	if i, ok := s.place(rec.key); ok {
		s.order = slices.Delete(s.order, i, i+1)
	}
	rec.key.CreatedAt = sess.CreatedAt
	i, _ := s.place(rec.key)
	s.order = slices.Insert(s.order, i, rec)
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
	if i, ok := s.place(rec.key); ok {
		s.order = slices.Delete(s.order, i, i+1)
	}
	s.mu.Unlock()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.deleted = true
	// Drop the data now rather than when the last stale pointer goes.
	rec.runs, rec.runAt, rec.msgs, rec.memory, rec.pages, rec.arena = nil, nil, nil, nil, nil, nil
	return nil
}

// place returns where the session at c is, or goes, in s.order; s.mu is
// held.
func (s *Store) place(c session.Cursor) (int, bool) {
	return slices.BinarySearchFunc(s.order, c, func(rec *record, c session.Cursor) int {
		return cmp.Or(rec.key.CreatedAt.Compare(c.CreatedAt), strings.Compare(rec.key.ID, c.ID))
	})
}

// ListSessions returns the sessions matching q, newest first.
func (s *Store) ListSessions(ctx context.Context, q session.Query) ([]session.Session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	end := len(s.order)
	if q.After != nil {
		end, _ = s.place(*q.After)
	}
	var out []session.Session
	for i := end - 1; i >= 0 && (q.Limit <= 0 || len(out) < q.Limit); i-- {
		if sess, ok := s.order[i].match(q); ok {
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
