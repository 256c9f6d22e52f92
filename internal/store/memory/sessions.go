package memory

import (
	"context"
	"slices"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// CreateSession stores a new session; an existing id is ErrConflict. The
// new session's LastSeq is 0 whatever sess says: only AppendEvents
// moves it, and the log holds exactly LastSeq events.
func (s *Store) CreateSession(ctx context.Context, sess session.Session) error {
	rec := &record{sess: sess.Clone()}
	rec.sess.LastSeq = 0
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess.ID]; ok {
		return errdefs.New(errdefs.ErrConflict, "session_exists", "session %s already exists", sess.ID)
	}
	s.sessions[sess.ID] = rec
	i, _ := slices.BinarySearch(s.ids, sess.ID)
	s.ids = slices.Insert(s.ids, i, sess.ID)
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

// UpdateSession replaces the stored session with sess, keeping its LastSeq.
func (s *Store) UpdateSession(ctx context.Context, sess session.Session) error {
	return s.write(sess.ID, func(rec *record) error {
		lastSeq := rec.sess.LastSeq
		rec.sess = sess.Clone()
		rec.sess.LastSeq = lastSeq
		return nil
	})
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
	if i, ok := slices.BinarySearch(s.ids, id); ok {
		s.ids = slices.Delete(s.ids, i, i+1)
	}
	s.mu.Unlock()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.deleted = true
	// Drop the data now rather than when the last stale pointer goes.
	rec.runs, rec.msgs, rec.memory, rec.pages, rec.arena = nil, nil, nil, nil, nil
	return nil
}

// ListSessions returns the sessions matching q, newest (largest id) first.
func (s *Store) ListSessions(ctx context.Context, q session.Query) ([]session.Session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	end := len(s.ids)
	if q.Before != "" {
		end, _ = slices.BinarySearch(s.ids, q.Before)
	}
	var out []session.Session
	for i := end - 1; i >= 0 && (q.Limit <= 0 || len(out) < q.Limit); i-- {
		if sess, ok := s.sessions[s.ids[i]].match(q); ok {
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
