package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// AppendMessages adds msgs to the end of their sessions' histories and
// writes each one's Position into msgs. Messages may belong to several
// sessions; either all are appended or, if any session is missing, none.
func (s *Store) AppendMessages(ctx context.Context, msgs ...session.Message) error {
	return s.appendMessages(ctx, "", msgs)
}

// AppendMessagesFenced is AppendMessages for messages of one session,
// appended only while the session's lease is held with token, which the
// script checks atomically with the append. Otherwise nothing is appended
// and the error wraps session.ErrFenced.
func (s *Store) AppendMessagesFenced(ctx context.Context, token int64, msgs ...session.Message) error {
	for i := 1; i < len(msgs); i++ {
		if msgs[i].SessionID != msgs[0].SessionID {
			return errdefs.New(errdefs.ErrInvalid, "mixed_sessions",
				"fenced messages mix sessions %s and %s", msgs[0].SessionID, msgs[i].SessionID)
		}
	}
	return s.appendMessages(ctx, itoa(token), msgs)
}

// appendMessages appends msgs, fenced by token unless it is "".
func (s *Store) appendMessages(ctx context.Context, token string, msgs []session.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := sessionsOf(msgs)
	ks := make([]string, 0, 2*len(ids)+1)
	args := make([]any, 0, 1+len(ids)+len(msgs))
	args = append(args, token)
	for _, id := range ids {
		k := s.keysOf(id)
		ks = append(ks, k.s, k.msgs)
		n := len(args)
		args = append(args, 0)
		for i := range msgs {
			if msgs[i].SessionID != id {
				continue
			}
			m := msgs[i]
			m.Position = 0 // a message's position is its place in the list
			b, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("append messages: encode message %s: %w", m.ID, err)
			}
			args = append(args, b)
		}
		args[n] = len(args) - n - 1
	}
	if token != "" {
		ks = append(ks, s.keysOf(ids[0]).lease)
	}
	firsts, err := scriptMessagesAppend.Run(ctx, s.rdb, ks, args...).Int64Slice()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(ids[replyIndex(err)-1])
	case isReply(err, replyFenced):
		return fmt.Errorf("append messages to session %s: %w", ids[0], session.ErrFenced)
	case err != nil:
		return fmt.Errorf("append messages: %w", err)
	}
	for j, id := range ids {
		next := firsts[j]
		for i := range msgs {
			if msgs[i].SessionID == id {
				msgs[i].Position = next
				next++
			}
		}
	}
	return nil
}

// sessionsOf returns the ids of the sessions msgs belong to, in order of
// first appearance.
func sessionsOf(msgs []session.Message) []string {
	ids := make([]string, 0, 1)
	for i := range msgs {
		if !slices.Contains(ids, msgs[i].SessionID) {
			ids = append(ids, msgs[i].SessionID)
		}
	}
	return ids
}

// replyIndex returns the number after the code of a script error reply
// such as "NOSESSION 2", or 1.
func replyIndex(err error) int {
	n, convErr := strconv.Atoi(replyDetail(err))
	if convErr != nil || n < 1 {
		return 1
	}
	return n
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
