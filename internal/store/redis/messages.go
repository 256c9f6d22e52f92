package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/session"
)

// AppendMessages adds msgs, all of one session, to the end of its
// history and writes each one's Position into msgs, while the session's
// lease is held with token: the script checks it atomically with the
// append, and otherwise appends nothing and the error wraps
// session.ErrFenced. A call naming more than one session is ErrInvalid,
// an unknown session ErrNotFound (whatever the token).
func (s *Store) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	id, err := session.MessagesOfOneSession(msgs)
	if err != nil {
		return err
	}
	args := make([]any, 0, 1+len(msgs))
	args = append(args, token)
	for i := range msgs {
		m := msgs[i]
		m.Position = 0 // a message's position is its place in the list
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("append messages: encode message %s: %w", m.ID, err)
		}
		args = append(args, b)
	}
	k := s.keysOf(id)
	first, err := scriptMessagesAppend.Run(ctx, s.rdb, []string{k.s, k.msgs, k.lease}, args...).Int64()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(id)
	case isReply(err, replyFenced):
		return fmt.Errorf("append messages to session %s: %w", id, session.ErrFenced)
	case err != nil:
		return fmt.Errorf("append messages to session %s: %w", id, err)
	}
	for i := range msgs {
		msgs[i].Position = first + int64(i)
	}
	return nil
}

// ListMessages returns a session's messages with Position > after, oldest
// first, at most limit of them when limit > 0.
func (s *Store) ListMessages(ctx context.Context, sessionID string, after int64, limit int) ([]session.Message, error) {
	start := max(after, 0)
	stop := int64(-1)
	if limit > 0 && int64(limit) <= math.MaxInt64-start {
		stop = start + int64(limit) - 1
	}
	k := s.keysOf(sessionID)
	var exists *goredis.IntCmd
	var items *goredis.StringSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		exists = pipe.Exists(ctx, k.s)
		items = pipe.LRange(ctx, k.msgs, start, stop)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
	}
	if exists.Val() == 0 {
		return nil, session.SessionNotFound(sessionID)
	}
	return decodeMessages(items.Val(), start+1)
}

// RecentMessages returns a session's last n messages, oldest first; n <= 0
// returns none.
func (s *Store) RecentMessages(ctx context.Context, sessionID string, n int) ([]session.Message, error) {
	k := s.keysOf(sessionID)
	var exists, length *goredis.IntCmd
	var items *goredis.StringSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		exists = pipe.Exists(ctx, k.s)
		length = pipe.LLen(ctx, k.msgs)
		if n > 0 {
			items = pipe.LRange(ctx, k.msgs, -int64(n), -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recent messages of session %s: %w", sessionID, err)
	}
	if exists.Val() == 0 {
		return nil, session.SessionNotFound(sessionID)
	}
	if items == nil {
		return nil, nil
	}
	got := items.Val()
	return decodeMessages(got, length.Val()-int64(len(got))+1)
}

// decodeMessages decodes stored messages, the first at position first.
func decodeMessages(items []string, first int64) ([]session.Message, error) {
	out := make([]session.Message, len(items))
	for i, item := range items {
		if err := json.Unmarshal([]byte(item), &out[i]); err != nil {
			return nil, fmt.Errorf("decode message: %w", err)
		}
		out[i].Position = first + int64(i)
	}
	return out, nil
}
