package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/session"
)

// messageColumns is the column list scanMessage reads, in its order.
const messageColumns = `session_id, position, id, run_id, role, content, tool_calls,
	tool_call_id, is_error, created_at, compaction, images, agent`

const insertMessageSQL = `INSERT INTO messages (` + messageColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

// AppendMessages adds msgs, all of one session, to the end of its history
// while its lease is held with token, and writes each one's Position into
// msgs once they are committed. A batch naming more than one session is
// ErrInvalid.
func (s *Store) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	id, err := session.MessagesOfOneSession(msgs)
	if err != nil {
		return err
	}
	docs, err := messageDocs(msgs)
	if err != nil {
		return err
	}
	positions := make([]int64, len(msgs))
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockSession(ctx, tx, id); err != nil {
			return err
		}
		if err := checkLease(ctx, tx, id, token); err != nil {
			return err
		}
		last, err := insertMessages(ctx, tx, msgs, docs)
		for i := range msgs {
			positions[i] = last + int64(i) + 1
		}
		return err
	})
	if err != nil {
		return wrapUnlessKnown(err, "append messages of session %s", id)
	}
	for i := range msgs {
		msgs[i].Position = positions[i]
	}
	return nil
}

// insertMessages inserts msgs, of one session whose row tx has locked,
// after its last message, and returns the position of that last message.
func insertMessages(ctx context.Context, tx pgx.Tx, msgs []session.Message, docs [][3]*string) (last int64, err error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	err = tx.QueryRow(ctx, `SELECT coalesce(max(position), 0) FROM messages WHERE session_id = $1`, msgs[0].SessionID).Scan(&last)
	if err != nil {
		return 0, err
	}
	batch := &pgx.Batch{}
	for i := range msgs {
		m, d := &msgs[i], docs[i]
		batch.Queue(insertMessageSQL, m.SessionID, last+int64(i)+1, m.ID, m.RunID, string(m.Role),
			m.Content, d[0], m.ToolCallID, m.IsError, micros(m.CreatedAt), d[1], d[2], m.Agent)
	}
	return last, tx.SendBatch(ctx, batch).Close()
}

// messageDocs encodes each message's tool calls, compaction and images.
func messageDocs(msgs []session.Message) ([][3]*string, error) {
	docs := make([][3]*string, len(msgs))
	for i, m := range msgs {
		var err error
		if docs[i][0], err = encodeToolCalls(m.ToolCalls); err != nil {
			return nil, fmt.Errorf("append message %s: %w", m.ID, err)
		}
		if docs[i][1], err = encodeJSON(m.Compaction, m.Compaction == nil, "compaction"); err != nil {
			return nil, fmt.Errorf("append message %s: %w", m.ID, err)
		}
		if docs[i][2], err = encodeJSON(m.Images, len(m.Images) == 0, "images"); err != nil {
			return nil, fmt.Errorf("append message %s: %w", m.ID, err)
		}
	}
	return docs, nil
}

// ListMessages returns a session's messages with Position > after, oldest
// first, at most limit of them when limit > 0.
func (s *Store) ListMessages(ctx context.Context, sessionID string, after int64, limit int) ([]session.Message, error) {
	msgs, err := s.queryMessages(ctx, sessionID, `SELECT `+messageColumns+` FROM messages
		WHERE session_id = $1 AND position > $2 ORDER BY position LIMIT $3`, sessionID, after, limitArg(limit))
	if err != nil {
		return nil, wrapUnlessKnown(err, "list messages of session %s", sessionID)
	}
	return msgs, nil
}

// RecentMessages returns a session's last n messages, oldest first; n <= 0
// returns none.
func (s *Store) RecentMessages(ctx context.Context, sessionID string, n int) ([]session.Message, error) {
	if n <= 0 {
		return nil, s.missing(ctx, sessionID, nil)
	}
	msgs, err := s.queryMessages(ctx, sessionID, `SELECT `+messageColumns+` FROM messages
		WHERE session_id = $1 ORDER BY position DESC LIMIT $2`, sessionID, int64(n))
	if err != nil {
		return nil, wrapUnlessKnown(err, "list recent messages of session %s", sessionID)
	}
	slices.Reverse(msgs)
	return msgs, nil
}

// queryMessages runs a SELECT of messageColumns. When it finds none it
// checks the session exists, since messages exist only in sessions that do.
func (s *Store) queryMessages(ctx context.Context, sessionID, query string, a ...any) ([]session.Message, error) {
	rows, err := s.pool.Query(ctx, query, a...)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (session.Message, error) { return scanMessage(row) })
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	if len(msgs) == 0 {
		return nil, s.missing(ctx, sessionID, nil)
	}
	return msgs, nil
}

// scanMessage reads one row of messageColumns.
func scanMessage(row pgx.Row) (session.Message, error) {
	var m session.Message
	var calls, compaction, images *string
	var created int64
	err := row.Scan(&m.SessionID, &m.Position, &m.ID, &m.RunID, (*string)(&m.Role), &m.Content,
		&calls, &m.ToolCallID, &m.IsError, &created, &compaction, &images, &m.Agent)
	if err != nil {
		return session.Message{}, err
	}
	if m.ToolCalls, err = decodeToolCalls(calls); err != nil {
		return session.Message{}, err
	}
	if compaction != nil {
		m.Compaction = new(session.Compaction)
		if err := decodeJSON(compaction, m.Compaction, "compaction"); err != nil {
			return session.Message{}, err
		}
	}
	if err := decodeJSON(images, &m.Images, "images"); err != nil {
		return session.Message{}, err
	}
	m.CreatedAt = fromMicros(created)
	return m, nil
}
