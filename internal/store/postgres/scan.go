package postgres

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// args collects a statement's bound values and names each one's
// placeholder, so statements built piece by piece number them right.
type args []any

// add binds v and returns its placeholder, $n.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// micros is how every time is stored: microseconds since the Unix epoch,
// as the SQLite store keeps them, so every store keeps the same precision.
func micros(t time.Time) int64 { return t.UnixMicro() }

// microsAbove is micros rounded up: a stored time is before t exactly
// when it is below microsAbove(t).
func microsAbove(t time.Time) int64 {
	if t.Nanosecond()%1000 != 0 {
		return t.UnixMicro() + 1
	}
	return t.UnixMicro()
}

// nullMicros stores the zero time as NULL, for times that may be unset.
func nullMicros(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	us := t.UnixMicro()
	return &us
}

// fromMicros is the inverse of micros; times come back in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// fromNullMicros is the inverse of nullMicros.
func fromNullMicros(us *int64) time.Time {
	if us == nil {
		return time.Time{}
	}
	return fromMicros(*us)
}

// limitArg is a LIMIT's bound value: NULL, no limit, for limit <= 0.
func limitArg(limit int) *int64 {
	if limit <= 0 {
		return nil
	}
	n := int64(limit)
	return &n
}

// encodeJSON returns v as JSON text, or NULL when empty says it is empty.
func encodeJSON(v any, empty bool, what string) (*string, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	text := string(b)
	return &text, nil
}

// decodeJSON reads JSON text into v; NULL leaves v as it is.
func decodeJSON(text *string, v any, what string) error {
	if text == nil {
		return nil
	}
	if err := json.Unmarshal([]byte(*text), v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// encodeExt returns a record's ext document as JSON text, or NULL when it
// holds only zero values (it encodes as T's zero value does).
func encodeExt[T any](ext T) (*string, error) {
	b, err := json.Marshal(ext)
	if err != nil {
		return nil, fmt.Errorf("encode ext: %w", err)
	}
	if string(b) == zeroJSON[T]() {
		return nil, nil
	}
	text := string(b)
	return &text, nil
}

// zeroJSONs holds the JSON of the zero value of each ext type.
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

// toolCall is a session.ToolCall as stored, with JSON names of its own so
// that renaming a Go field cannot change what is stored (as in SQLite).
type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func encodeToolCalls(calls []session.ToolCall) (*string, error) {
	stored := make([]toolCall, len(calls))
	for i, c := range calls {
		stored[i] = toolCall(c)
	}
	return encodeJSON(stored, len(calls) == 0, "tool calls")
}

func decodeToolCalls(text *string) ([]session.ToolCall, error) {
	var stored []toolCall
	if err := decodeJSON(text, &stored, "tool calls"); err != nil || len(stored) == 0 {
		return nil, err
	}
	calls := make([]session.ToolCall, len(stored))
	for i, c := range stored {
		calls[i] = session.ToolCall(c)
	}
	return calls, nil
}
