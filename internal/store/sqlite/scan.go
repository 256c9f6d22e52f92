package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// requireSession returns nil if session id exists, an ErrNotFound if it
// does not. Lookups that found nothing call it to tell "no such session"
// from "no such run/key" or "nothing yet".
func (r *reader) requireSession(ctx context.Context, id string) error {
	var one int
	err := r.queryRow(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return session.SessionNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("look up session %s: %w", id, err)
	}
	return nil
}

// requireSession is reader.requireSession on a reader of its own.
func (s *Store) requireSession(ctx context.Context, id string) error {
	r, err := s.acquire(ctx)
	if err != nil {
		return fmt.Errorf("look up session %s: %w", id, err)
	}
	defer s.release(r)
	return r.requireSession(brief(ctx), id)
}

// micros is how every time is stored: microseconds since the Unix epoch,
// which keeps the precision storetest requires and sorts as an integer.
func micros(t time.Time) int64 { return t.UnixMicro() }

// microsAbove is micros rounded up: the first microsecond not before t,
// so that a stored time, a whole microsecond, is before t exactly when it
// is below microsAbove(t).
func microsAbove(t time.Time) int64 {
	if t.Nanosecond()%1000 != 0 {
		return t.UnixMicro() + 1
	}
	return t.UnixMicro()
}

// nullMicros stores the zero time as NULL, for times that may be unset.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// fromMicros is the inverse of micros; times come back in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// fromNullMicros is the inverse of nullMicros.
func fromNullMicros(us sql.NullInt64) time.Time {
	if !us.Valid {
		return time.Time{}
	}
	return fromMicros(us.Int64)
}

// limitClause returns the LIMIT clause of a limit where <= 0 means
// "all". The number is written into the statement rather than bound: a
// LIMIT bound to a parameter has SQLite prepare the statement again each
// time it is bound (it plans with the value), which would undo keeping
// the statement prepared (see readers); the few limits the kernel asks
// for are a few statements each.
func limitClause(limit int) string {
	if limit <= 0 {
		return ""
	}
	return " LIMIT " + strconv.Itoa(limit)
}

// encodeMetadata returns a session's metadata as JSON text, or NULL when
// there is none.
func encodeMetadata(m map[string]string) (any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return string(b), nil
}

func decodeMetadata(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	return m, nil
}

// encodeExt returns a record's ext document as JSON text, or NULL when it
// holds only zero values (it encodes as T's zero value does).
func encodeExt[T any](ext T) (any, error) {
	b, err := json.Marshal(ext)
	if err != nil {
		return nil, fmt.Errorf("encode ext: %w", err)
	}
	if string(b) == zeroJSON[T]() {
		return nil, nil
	}
	return string(b), nil
}

// zeroJSONs holds the JSON of the zero value of each ext type, by type,
// so that encodeExt does not encode it again on every write.
var zeroJSONs sync.Map

// zeroJSON returns the JSON of T's zero value.
func zeroJSON[T any]() string {
	t := reflect.TypeFor[T]()
	if s, ok := zeroJSONs.Load(t); ok {
		return s.(string)
	}
	var zero T
	b, _ := json.Marshal(zero) // what encodes as ext does encodes as zero
	zeroJSONs.Store(t, string(b))
	return string(b)
}

// decodeExt reads an ext document into ext; NULL leaves it as it is.
func decodeExt[T any](b []byte, ext *T) error {
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, ext); err != nil {
		return fmt.Errorf("decode ext: %w", err)
	}
	return nil
}

// toolCall is a session.ToolCall as stored. It has its own JSON names so
// that renaming a Go field cannot change what is on disk.
type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// encodeToolCalls returns tool calls as a JSON array, or NULL when none.
func encodeToolCalls(calls []session.ToolCall) (any, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	stored := make([]toolCall, len(calls))
	for i, c := range calls {
		stored[i] = toolCall(c)
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return nil, fmt.Errorf("encode tool calls: %w", err)
	}
	return string(b), nil
}

func decodeToolCalls(b []byte) ([]session.ToolCall, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var stored []toolCall
	if err := json.Unmarshal(b, &stored); err != nil {
		return nil, fmt.Errorf("decode tool calls: %w", err)
	}
	calls := make([]session.ToolCall, len(stored))
	for i, c := range stored {
		calls[i] = session.ToolCall(c)
	}
	return calls, nil
}

// rollback ends tx if it is still open. Deferred after BeginTx: after a
// Commit it does nothing, and after a failure the failure is what counts.
func rollback(tx *sql.Tx) { _ = tx.Rollback() }
