package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/kerneld/kerneld/internal/session"
)

// messageColumns is the column list scanMessage reads, in its order.
const messageColumns = `session_id, position, id, run_id, role, content, tool_calls,
	tool_call_id, is_error, created_at, compaction, images, agent`

// lastPositionSQL returns the position of a session's newest message, 0
// for none, and no row for a missing session.
const lastPositionSQL = `SELECT (SELECT coalesce(max(position), 0) FROM messages
	WHERE session_id = sessions.id) FROM sessions WHERE id = ?`

const insertMessageSQL = `INSERT INTO messages (` + messageColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// AppendMessages adds msgs, all of one session, to the end of its history
// while its lease is held with token, and writes each one's Position into
// msgs. A batch naming more than one session is ErrInvalid.
func (s *Store) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if _, err := session.MessagesOfOneSession(msgs); err != nil {
		return err
	}
	calls, err := encodeMessages(msgs)
	if err != nil {
		return err
	}
	// msgs is untouched until the messages are committed.
	positions := make([]int64, len(msgs))
	err = s.write(ctx, func(tx *batchTx) (own, err error) {
		return tx.appendMessages(msgs, calls, positions, token)
	})
	if err != nil {
		return err
	}
	for i := range msgs {
		msgs[i].Position = positions[i]
	}
	return nil
}

// encodeMessages returns the columns of msgs that are encoded,
// perMessage of them a message: its tool calls, its compaction, its
// images.
func encodeMessages(msgs []session.Message) ([]any, error) {
	calls := make([]any, perMessage*len(msgs))
	for i := range msgs {
		var err error
		if calls[perMessage*i], err = encodeToolCalls(msgs[i].ToolCalls); err != nil {
			return nil, fmt.Errorf("append message %s: %w", msgs[i].ID, err)
		}
		if calls[perMessage*i+1], err = encodeCompaction(msgs[i].Compaction); err != nil {
			return nil, fmt.Errorf("append message %s: %w", msgs[i].ID, err)
		}
		if calls[perMessage*i+2], err = encodeImageRefs(msgs[i].Images); err != nil {
			return nil, fmt.Errorf("append message %s: %w", msgs[i].ID, err)
		}
	}
	return calls, nil
}

// perMessage counts the encoded columns AppendMessages passes per message.
const perMessage = 3

// appendMessages inserts msgs, of one session, with their encoded tool
// calls, compactions and images (perMessage of them each), after the
// session's last message, while the session's lease is held with token, and puts the positions it gave them in positions. A
// missing session is reported before the lease.
func (tx *batchTx) appendMessages(msgs []session.Message, calls []any, positions []int64, token int64) (own, err error) {
	id := msgs[0].SessionID
	var last int64
	err = tx.queryRow(stmtLastPosition, id).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return session.SessionNotFound(id), nil
	}
	if err != nil {
		return nil, fmt.Errorf("append messages: last position of session %s: %w", id, err)
	}
	if err := tx.leases.fenced(id, token); err != nil {
		return err, nil
	}
	for i := range msgs {
		m := &msgs[i]
		last++
		positions[i] = last
		_, err := tx.exec(stmtInsertMessage, m.SessionID, positions[i], m.ID, m.RunID, string(m.Role),
			m.Content, calls[perMessage*i], m.ToolCallID, m.IsError, micros(m.CreatedAt), calls[perMessage*i+1],
			calls[perMessage*i+2], m.Agent)
		if err != nil {
			return nil, fmt.Errorf("append message %s: %w", m.ID, err)
		}
	}
	return nil, nil
}

// ListMessages returns a session's messages with Position > after, oldest
// first, at most limit of them when limit > 0.
func (s *Store) ListMessages(ctx context.Context, sessionID string, after int64, limit int) ([]session.Message, error) {
	msgs, err := s.queryMessages(ctx, limit > 0 && limit <= maxBriefRows, sessionID, `SELECT `+messageColumns+`
		FROM messages WHERE session_id = ? AND position > ? ORDER BY position`+limitClause(limit), sessionID, after)
	if err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
	}
	return msgs, nil
}

// RecentMessages returns a session's last n messages, oldest first; n <= 0
// returns none.
func (s *Store) RecentMessages(ctx context.Context, sessionID string, n int) ([]session.Message, error) {
	if n <= 0 {
		return nil, s.requireSession(ctx, sessionID)
	}
	msgs, err := s.queryMessages(ctx, n <= maxBriefRows, sessionID, `SELECT `+messageColumns+`
		FROM messages WHERE session_id = ? ORDER BY position DESC`+limitClause(n), sessionID)
	if err != nil {
		return nil, fmt.Errorf("list recent messages of session %s: %w", sessionID, err)
	}
	slices.Reverse(msgs)
	return msgs, nil
}

// queryMessages runs a SELECT of messageColumns on a reader, briefly
// (see brief) if short. When it finds none it checks the session exists,
// since messages exist only in sessions that do.
func (s *Store) queryMessages(ctx context.Context, short bool, sessionID, query string, args ...any) ([]session.Message, error) {
	r, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release(r)
	if short {
		ctx = brief(ctx)
	}
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var msgs []session.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, r.requireSession(ctx, sessionID)
	}
	return msgs, nil
}

// scanMessage reads one row of messageColumns.
func scanMessage(row scanner) (session.Message, error) {
	var m session.Message
	var calls, compaction, images []byte
	var created int64
	err := row.Scan(&m.SessionID, &m.Position, &m.ID, &m.RunID, (*string)(&m.Role), &m.Content,
		&calls, &m.ToolCallID, &m.IsError, &created, &compaction, &images, &m.Agent)
	if err != nil {
		return session.Message{}, err
	}
	if m.ToolCalls, err = decodeToolCalls(calls); err != nil {
		return session.Message{}, err
	}
	if m.Compaction, err = decodeCompaction(compaction); err != nil {
		return session.Message{}, err
	}
	if m.Images, err = decodeImageRefs(images); err != nil {
		return session.Message{}, err
	}
	m.CreatedAt = fromMicros(created)
	return m, nil
}

// encodeCompaction returns a compaction entry's JSON, or nil (NULL) for a
// message that is not one.
func encodeCompaction(c *session.Compaction) (any, error) {
	if c == nil {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode compaction: %w", err)
	}
	return string(b), nil
}

// decodeCompaction reads what encodeCompaction wrote.
func decodeCompaction(b []byte) (*session.Compaction, error) {
	if b == nil {
		return nil, nil
	}
	var c session.Compaction
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decode compaction: %w", err)
	}
	return &c, nil
}
