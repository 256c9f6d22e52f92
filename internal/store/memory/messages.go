package memory

import (
	"context"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// AppendMessages adds msgs to the end of their sessions' histories and
// writes each one's Position into msgs. Messages may belong to several
// sessions; either all are appended or, if any session is missing, none.
func (s *Store) AppendMessages(ctx context.Context, msgs ...session.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	recs, err := s.lockForMessages(msgs)
	if err != nil {
		return err
	}
	defer func() {
		for _, rec := range recs {
			rec.mu.Unlock()
		}
	}()
	for i := range msgs {
		rec := recs[msgs[i].SessionID]
		msgs[i].Position = int64(len(rec.msgs)) + 1
		rec.msgs = append(rec.msgs, cloneMessage(msgs[i]))
	}
	return nil
}

// lockForMessages write-locks the records of every session msgs name and
// returns them by id; on error it holds no lock. It finds every record
// before locking any, since taking the store lock while holding a record
// lock could deadlock against ListSessions, and locks them in id order so
// two calls naming the same sessions cannot deadlock either.
func (s *Store) lockForMessages(msgs []session.Message) (map[string]*record, error) {
	ids := make([]string, 0, 1)
	for i := range msgs {
		if !slices.Contains(ids, msgs[i].SessionID) {
			ids = append(ids, msgs[i].SessionID)
		}
	}
	slices.SortFunc(ids, strings.Compare)
	recs, err := s.records(ids)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		recs[id].mu.Lock()
		if recs[id].deleted {
			for _, held := range ids[:i+1] {
				recs[held].mu.Unlock()
			}
			return nil, session.SessionNotFound(id)
		}
	}
	return recs, nil
}

// records returns the records of sessions ids, or an error for the first
// one missing.
func (s *Store) records(ids []string) (map[string]*record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	recs := make(map[string]*record, len(ids))
	for _, id := range ids {
		rec := s.sessions[id]
		if rec == nil {
			return nil, session.SessionNotFound(id)
		}
		recs[id] = rec
	}
	return recs, nil
}

// ListMessages returns a session's messages with Position > after, oldest
// first, at most limit of them when limit > 0.
func (s *Store) ListMessages(ctx context.Context, sessionID string, after int64, limit int) ([]session.Message, error) {
	var out []session.Message
	err := s.read(sessionID, func(rec *record) error {
		// Positions are 1..len, so message p sits at index p-1.
		start := int(min(max(after, 0), int64(len(rec.msgs))))
		end := len(rec.msgs)
		if limit > 0 && limit < end-start {
			end = start + limit
		}
		out = cloneMessages(rec.msgs[start:end])
		return nil
	})
	return out, err
}

// RecentMessages returns a session's last n messages, oldest first; n <= 0
// returns none.
func (s *Store) RecentMessages(ctx context.Context, sessionID string, n int) ([]session.Message, error) {
	var out []session.Message
	err := s.read(sessionID, func(rec *record) error {
		if n > 0 {
			out = cloneMessages(rec.msgs[max(len(rec.msgs)-n, 0):])
		}
		return nil
	})
	return out, err
}

func cloneMessages(msgs []session.Message) []session.Message {
	out := make([]session.Message, len(msgs))
	for i := range msgs {
		out[i] = cloneMessage(msgs[i])
	}
	return out
}
