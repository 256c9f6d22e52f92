package memory

import (
	"context"

	"github.com/kerneld/kerneld/internal/session"
)

// AppendMessages adds msgs, all of one session, to the end of its history
// and writes each one's Position into msgs, while the session's lease is
// held with token. A batch naming more than one session is ErrInvalid.
func (s *Store) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	id, err := session.MessagesOfOneSession(msgs)
	if err != nil {
		return err
	}
	return s.write(id, func(rec *record) error {
		if err := rec.fenced(token, s.now()); err != nil {
			return err
		}
		for i := range msgs {
			msgs[i].Position = int64(len(rec.msgs)) + 1
			rec.msgs = append(rec.msgs, cloneMessage(msgs[i]))
		}
		return nil
	})
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
