package session_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
)

// wireEvent is the part of an event's wire form the tests look at.
type wireEvent struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
	Timestamp int64  `json:"timestamp"`
	Metadata  struct {
		Kerneld map[string]any `json:"kerneld"`
	} `json:"metadata"`
}

// decodeWire checks that b is one JSON object and decodes it.
func decodeWire(tb testing.TB, b []byte) wireEvent {
	tb.Helper()
	require.True(tb, json.Valid(b), "not valid JSON: %q", b)
	var w wireEvent
	dec := json.NewDecoder(bytes.NewReader(b))
	require.NoError(tb, dec.Decode(&w), "%s", b)
	require.False(tb, dec.More(), "more than one value: %s", b)
	return w
}

// stamped returns ev with the envelope the log gives it.
func stamped(ev session.Event) session.Event {
	ev.Seq, ev.SessionID, ev.RunID = 42, "s1", "r1"
	ev.Time = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	return ev
}

func TestEvent_AppendJSON(t *testing.T) {
	t.Run("envelope", func(t *testing.T) {
		ev := stamped(session.TextMessageContent("m1", "Hi"))
		b := ev.AppendJSON(nil)
		assert.True(t, bytes.HasPrefix(b, []byte(`{"type":"TEXT_MESSAGE_CONTENT",`)), "%s", b)
		w := decodeWire(t, b)
		assert.Equal(t, "TEXT_MESSAGE_CONTENT", w.Type)
		assert.Equal(t, "m1", w.MessageID)
		assert.Equal(t, "Hi", w.Delta)
		assert.Equal(t, ev.Time.UnixMilli(), w.Timestamp)
		assert.Equal(t, map[string]any{"seq": float64(42), "sessionId": "s1", "runId": "r1"}, w.Metadata.Kerneld)
	})

	t.Run("stream form leaves the seq to the frame id", func(t *testing.T) {
		ev := stamped(session.TextMessageContent("m1", "Hi"))
		w := decodeWire(t, ev.AppendStreamJSON(nil))
		assert.Equal(t, map[string]any{"sessionId": "s1", "runId": "r1"}, w.Metadata.Kerneld)
		assert.Equal(t, ev.Time.UnixMilli(), w.Timestamp)
	})

	t.Run("appends to dst", func(t *testing.T) {
		ev := stamped(session.TextMessageEnd("m1"))
		b := ev.AppendJSON([]byte("data: "))
		require.True(t, bytes.HasPrefix(b, []byte("data: {")))
		decodeWire(t, b[len("data: "):])
		m, err := ev.MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, b[len("data: "):], m)
	})

	t.Run("meta joins the envelope", func(t *testing.T) {
		tests := []struct {
			name string
			ev   session.Event
			key  string
			want any
		}{
			{"cancel reason", session.RunFinished("s1", "r1", session.OutcomeCancelled, session.ReasonCancelled, session.Usage{}), "reason", "cancelled"},
			{"tool error", session.ToolCallResult("m1", "c1", "boom", true), "isError", true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ev := stamped(tt.ev)
				w := decodeWire(t, ev.AppendJSON(nil))
				assert.Equal(t, tt.want, w.Metadata.Kerneld[tt.key])
				assert.Equal(t, float64(42), w.Metadata.Kerneld["seq"])
			})
		}
	})

	t.Run("degenerate data and meta", func(t *testing.T) {
		tests := []struct {
			name       string
			data, meta json.RawMessage
		}{
			{"no data", nil, nil},
			{"empty object", json.RawMessage(`{}`), nil},
			{"data not an object", json.RawMessage(`[1]`), nil},
			{"meta not an object", json.RawMessage(`{"type":"CUSTOM"}`), json.RawMessage(`[1]`)},
			{"empty meta", json.RawMessage(`{"type":"CUSTOM"}`), json.RawMessage(`{}`)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ev := stamped(session.Event{Type: session.EventCustom, Data: tt.data, Meta: tt.meta})
				w := decodeWire(t, ev.AppendJSON(nil))
				assert.Equal(t, float64(42), w.Metadata.Kerneld["seq"])
			})
		}
	})

	t.Run("escapes", func(t *testing.T) {
		tests := []struct {
			name, in, want string
		}{
			{"plain", "Hello, world", "Hello, world"},
			{"quotes and backslashes", `say "hi" \o/`, `say "hi" \o/`},
			{"newline, return, tab", "a\nb\rc\td", "a\nb\rc\td"},
			{"NUL and other controls", "\x00\x01\x1f", "\x00\x01\x1f"},
			{"DEL", "\x7f", "\x7f"},
			{"HTML characters kept", "<b>&amp;</b>", "<b>&amp;</b>"},
			{"line and paragraph separators", "a\u2028b\u2029c", "a\u2028b\u2029c"},
			{"multi-byte", "日本語 ✓ 🦀", "日本語 ✓ 🦀"},
			{"invalid byte", "a\xffb", "a\ufffdb"},
			{"truncated rune", "a\xe2\x82", "a\ufffd\ufffd"},
			{"lone continuation bytes", "\x80\x80", "\ufffd\ufffd"},
			{"surrogate half", "\xed\xa0\x80", "\ufffd\ufffd\ufffd"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ev := stamped(session.TextMessageContent("m1", tt.in))
				ev.SessionID = tt.in
				b := ev.AppendJSON(nil)
				w := decodeWire(t, b)
				assert.Equal(t, tt.want, w.Delta)
				assert.Equal(t, tt.want, w.Metadata.Kerneld["sessionId"])
				checkRaw(t, b)
				if strings.Contains(tt.in, "<") {
					assert.Contains(t, string(b), "<b>", "< is not escaped")
				}
			})
		}
	})
}

// checkRaw fails if b holds a byte or character JSON text may carry only
// escaped: a control character, U+2028 or U+2029, or invalid UTF-8.
func checkRaw(tb testing.TB, b []byte) {
	tb.Helper()
	assert.True(tb, utf8.Valid(b), "invalid UTF-8 in %q", b)
	for _, c := range b {
		if c < 0x20 {
			tb.Errorf("raw control character %#x in %q", c, b)
		}
	}
	assert.NotContains(tb, string(b), "\u2028")
	assert.NotContains(tb, string(b), "\u2029")
}

func TestEvent_Member(t *testing.T) {
	ev := session.ToolCallStart("c1", "current_time", "m1")
	assert.Equal(t, "c1", ev.Member("toolCallId"))
	assert.Equal(t, "current_time", ev.Member("toolCallName"))
	assert.Equal(t, "m1", ev.Member("parentMessageId"))
	assert.Empty(t, ev.Member("missing"))
	orphan := session.ToolCallStart("c1", "x", "")
	assert.NotContains(t, orphan.Fields(), "parentMessageId", "an absent parent is left out, not sent empty")
}

func TestRunFinished(t *testing.T) {
	ev := session.RunFinished("s1", "r1", session.OutcomeSuccess, "", session.Usage{InputTokens: 3, OutputTokens: 4})
	assert.Nil(t, ev.Meta)
	f := ev.Fields()
	assert.Equal(t, "RUN_FINISHED", f["type"])
	assert.Equal(t, "s1", f["threadId"])
	assert.Equal(t, "r1", f["runId"])
	assert.Equal(t, map[string]any{"type": "success"}, f["outcome"])
	assert.Equal(t, []any{map[string]any{"inputTokens": float64(3), "outputTokens": float64(4), "totalTokens": float64(7)}}, f["usage"])
}

func TestRunErrored(t *testing.T) {
	ev := session.RunErrored(session.ErrorCodeModel, `provider said "no"`, session.Usage{})
	assert.Equal(t, session.EventRunError, ev.Type)
	assert.Equal(t, "model_error", ev.Member("code"))
	assert.Equal(t, `provider said "no"`, ev.Member("message"))
	assert.True(t, ev.Type.Ends())
	assert.False(t, session.EventToolCallEnd.Ends())
}

func TestCustom(t *testing.T) {
	ev := session.Custom("kerneld.run.queued", map[string]any{"position": 1})
	assert.Equal(t, map[string]any{"position": float64(1)}, ev.Fields()["value"])
	bad := session.Custom("kerneld.x", func() {})
	assert.Contains(t, bad.Fields(), "value")
	assert.Nil(t, bad.Fields()["value"])
}

// FuzzAppendJSON checks that any delta survives the wire: the
// TEXT_MESSAGE_CONTENT object is valid JSON whose delta decodes to the
// original string, or for invalid UTF-8 to what encoding/json makes of it.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{"", "Hi", " there", "\"\\/", "\x00\x1f\x7f", "\u2028\u2029", "日本語", "\xff", "a\xe2\x82", "</script>"} {
		f.Add(s, int64(1), "s1")
	}
	f.Fuzz(func(t *testing.T, delta string, seq int64, sessionID string) {
		ev := session.TextMessageContent("m1", delta)
		ev.Seq, ev.SessionID, ev.RunID, ev.Time = seq, sessionID, "r1", time.Unix(1700000000, 0)
		b := ev.AppendJSON(nil)
		if !json.Valid(b) {
			t.Fatalf("not valid JSON: %q", b)
		}
		var w struct {
			Type     string `json:"type"`
			Delta    string `json:"delta"`
			Metadata struct {
				Kerneld struct {
					Seq       int64  `json:"seq"`
					SessionID string `json:"sessionId"`
				} `json:"kerneld"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		if w.Type != "TEXT_MESSAGE_CONTENT" || w.Metadata.Kerneld.Seq != seq {
			t.Fatalf("type %q seq %d in %q", w.Type, w.Metadata.Kerneld.Seq, b)
		}
		if got, want := w.Delta, viaEncodingJSON(t, delta); got != want {
			t.Fatalf("delta = %q, want %q", got, want)
		}
		if utf8.ValidString(delta) && w.Delta != delta {
			t.Fatalf("delta = %q, want %q", w.Delta, delta)
		}
		if got, want := w.Metadata.Kerneld.SessionID, viaEncodingJSON(t, sessionID); got != want {
			t.Fatalf("sessionId = %q, want %q", got, want)
		}
		if bytes.ContainsRune(b, '\u2028') || bytes.ContainsRune(b, '\u2029') || !utf8.Valid(b) {
			t.Fatalf("unescaped U+2028/U+2029 or invalid UTF-8 in %q", b)
		}
	})
}

// viaEncodingJSON returns s as it comes back from a round trip through
// encoding/json, which replaces each invalid byte with U+FFFD.
func viaEncodingJSON(tb testing.TB, s string) string {
	tb.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatal(err)
	}
	return out
}
