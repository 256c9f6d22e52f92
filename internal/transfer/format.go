// Package transfer moves sessions between stores: Export writes every
// tenant's sessions, with their runs, messages, memory, images, schedules
// and events, to a dump of JSON lines, and Import writes a dump into
// another store with every id, position and seq as it was. Verify checks a
// store against a dump, session by session.
//
// It works through the stores' interfaces only, so it moves data between
// any two backends. It streams: memory stays bounded by a page of records,
// whatever the size of the dump. It knows neither HTTP nor the kernel, and
// it starts no goroutines.
//
// The dump format is documented in docs/transfer.md; FormatVersion names
// its version, which a dump states in its first line.
package transfer

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// Format and FormatVersion identify a dump in its header line. An import
// refuses a dump of a later version, whose records it may not know.
const (
	Format        = "kerneld-dump"
	FormatVersion = 1
)

// The kinds of record, in the order a dump holds them: one header, then
// for each session its session record, its other records and its
// session_end, and last one end record.
const (
	kindHeader     = "header"
	kindSession    = "session"
	kindRun        = "run"
	kindMemory     = "memory"
	kindImage      = "image"
	kindSchedule   = "schedule"
	kindMessage    = "message"
	kindEvent      = "event"
	kindSessionEnd = "session_end"
	kindEnd        = "end"
)

// kindOnly reads a record's kind before the record itself.
type kindOnly struct {
	Kind string `json:"kind"`
}

// headerRecord opens a dump.
type headerRecord struct {
	Kind      string    `json:"kind"`
	Format    string    `json:"format"`
	Version   int       `json:"version"`
	Dump      string    `json:"dump"` // a new id per export; imports mark their sessions with it
	CreatedAt time.Time `json:"created_at"`
	Source    string    `json:"source,omitempty"` // the store it was exported from
}

// sessionRecord is a session. LastSeq is how many events follow it.
type sessionRecord struct {
	Kind          string             `json:"kind"`
	ID            string             `json:"id"`
	Tenant        string             `json:"tenant"`
	Agent         string             `json:"agent"`
	Name          string             `json:"name,omitempty"`
	Metadata      map[string]string  `json:"metadata,omitempty"`
	State         string             `json:"state"`
	ParentID      string             `json:"parent_id,omitempty"`
	RootID        string             `json:"root_id,omitempty"`
	Depth         int                `json:"depth,omitempty"`
	CreatedAt     time.Time          `json:"created_at"`
	UpdatedAt     time.Time          `json:"updated_at"`
	LastSeq       int64              `json:"last_seq"`
	ActiveRunID   string             `json:"active_run_id,omitempty"`
	TTL           time.Duration      `json:"ttl_ns,omitempty"`
	ExpiresAt     time.Time          `json:"expires_at,omitzero"`
	InheritMemory string             `json:"inherit_memory,omitempty"`
	ForkedFrom    string             `json:"forked_from,omitempty"`
	Version       int64              `json:"version"`
	Ext           session.SessionExt `json:"ext"`
}

// runRecord is a run; Ext is stored as the stores store it.
type runRecord struct {
	Kind           string          `json:"kind"`
	ID             string          `json:"id"`
	SessionID      string          `json:"session_id"`
	State          string          `json:"state"`
	Input          string          `json:"input"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	StartedAt      time.Time       `json:"started_at,omitzero"`
	EndedAt        time.Time       `json:"ended_at,omitzero"`
	Error          *runErrorRecord `json:"error,omitempty"`
	InputTokens    int64           `json:"input_tokens,omitempty"`
	OutputTokens   int64           `json:"output_tokens,omitempty"`
	StartSeq       int64           `json:"start_seq,omitempty"`
	EndSeq         int64           `json:"end_seq,omitempty"`
	Version        int64           `json:"version"`
	Ext            session.RunExt  `json:"ext"`
}

type runErrorRecord struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// messageRecord is one message of the history, at its position.
type messageRecord struct {
	Kind       string              `json:"kind"`
	SessionID  string              `json:"session_id"`
	Position   int64               `json:"position"`
	ID         string              `json:"id"`
	RunID      string              `json:"run_id,omitempty"`
	Role       string              `json:"role"`
	Content    string              `json:"content"`
	Images     []session.ImageRef  `json:"images,omitempty"`
	ToolCalls  []toolCallRecord    `json:"tool_calls,omitempty"`
	ToolCallID string              `json:"tool_call_id,omitempty"`
	IsError    bool                `json:"is_error,omitempty"`
	Compaction *session.Compaction `json:"compaction,omitempty"`
	CreatedAt  time.Time           `json:"created_at"`
	Agent      string              `json:"agent,omitempty"`
}

type toolCallRecord struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// memoryRecord is one memory entry. Value is its JSON text verbatim, or,
// when that text would not survive being embedded (see splitJSON),
// ValueB64 holds its bytes.
type memoryRecord struct {
	Kind      string          `json:"kind"`
	SessionID string          `json:"session_id"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value,omitempty"`
	ValueB64  []byte          `json:"value_b64,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// imageRecord is an image the session refers to, bytes included.
type imageRecord struct {
	Kind      string    `json:"kind"`
	SessionID string    `json:"session_id"`
	Tenant    string    `json:"tenant"`
	Hash      string    `json:"hash"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	Data      []byte    `json:"data"`
	CreatedAt time.Time `json:"created_at"`
}

// scheduleRecord is a schedule of the session. Its claim stays behind: a
// claim fences one store's firings.
type scheduleRecord struct {
	Kind      string           `json:"kind"`
	SessionID string           `json:"session_id"`
	ID        string           `json:"id"`
	Tenant    string           `json:"tenant"`
	At        time.Time        `json:"at,omitzero"`
	Every     time.Duration    `json:"every_ns,omitempty"`
	Input     string           `json:"input"`
	IfBusy    string           `json:"if_busy,omitempty"`
	NextAt    time.Time        `json:"next_at,omitzero"`
	CreatedAt time.Time        `json:"created_at"`
	Fired     int64            `json:"fired,omitempty"`
	Last      *schedule.Firing `json:"last,omitempty"`
}

// eventRecord is one event of the log at its seq. Data and Meta are the
// stored bytes verbatim, or in DataB64 and MetaB64 when those would not
// survive being embedded (see splitJSON).
type eventRecord struct {
	Kind      string          `json:"kind"`
	SessionID string          `json:"session_id"`
	Seq       int64           `json:"seq"`
	RunID     string          `json:"run_id,omitempty"`
	Type      string          `json:"type"`
	Time      time.Time       `json:"time"`
	Data      json.RawMessage `json:"data,omitempty"`
	DataB64   []byte          `json:"data_b64,omitempty"`
	Meta      json.RawMessage `json:"meta,omitempty"`
	MetaB64   []byte          `json:"meta_b64,omitempty"`
}

// Counts are how many records of each kind a session has.
type Counts struct {
	Runs      int   `json:"runs"`
	Messages  int   `json:"messages"`
	Memory    int   `json:"memory"`
	Images    int   `json:"images"`
	Schedules int   `json:"schedules"`
	Events    int64 `json:"events"`
}

// sessionEndRecord closes a session's records with their counts and the
// SHA-256 of their contents (see digest).
type sessionEndRecord struct {
	Kind      string `json:"kind"`
	SessionID string `json:"session_id"`
	Counts    Counts `json:"counts"`
	SHA256    string `json:"sha256"`
}

// endRecord closes a dump; a dump without one was cut short.
type endRecord struct {
	Kind     string `json:"kind"`
	Sessions int    `json:"sessions"`
}

// splitJSON returns b for embedding verbatim as JSON when that keeps its
// bytes, and otherwise its bytes for base64: text that is not valid JSON,
// or valid JSON with whitespace between tokens, which the encoder would
// drop. An empty b is neither.
func splitJSON(b []byte) (raw json.RawMessage, b64 []byte) {
	if len(b) == 0 {
		return nil, nil
	}
	var compact bytes.Buffer
	if json.Compact(&compact, b) == nil && bytes.Equal(compact.Bytes(), b) {
		return json.RawMessage(b), nil
	}
	return nil, b
}

// joinJSON is splitJSON undone.
func joinJSON(raw json.RawMessage, b64 []byte) []byte {
	if len(raw) > 0 {
		return []byte(raw)
	}
	if len(b64) > 0 {
		return b64
	}
	return nil
}

// micro is t as a dump holds times: UTC, to the microsecond, which every
// store keeps. The zero time stays zero.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}
