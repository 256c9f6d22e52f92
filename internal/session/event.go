package session

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// EventType is an AG-UI 1.0 event type, used verbatim on the wire. These
// values are API: add new ones, never rename.
type EventType string

// The AG-UI 1.0 event types kerneld emits.
const (
	EventRunStarted              EventType = "RUN_STARTED"
	EventRunFinished             EventType = "RUN_FINISHED"
	EventRunError                EventType = "RUN_ERROR"
	EventStepStarted             EventType = "STEP_STARTED"
	EventStepFinished            EventType = "STEP_FINISHED"
	EventTextMessageStart        EventType = "TEXT_MESSAGE_START"
	EventTextMessageContent      EventType = "TEXT_MESSAGE_CONTENT"
	EventTextMessageEnd          EventType = "TEXT_MESSAGE_END"
	EventReasoningStart          EventType = "REASONING_START"
	EventReasoningMessageStart   EventType = "REASONING_MESSAGE_START"
	EventReasoningMessageContent EventType = "REASONING_MESSAGE_CONTENT"
	EventReasoningMessageEnd     EventType = "REASONING_MESSAGE_END"
	EventReasoningEnd            EventType = "REASONING_END"
	EventToolCallStart           EventType = "TOOL_CALL_START"
	EventToolCallArgs            EventType = "TOOL_CALL_ARGS"
	EventToolCallEnd             EventType = "TOOL_CALL_END"
	EventToolCallResult          EventType = "TOOL_CALL_RESULT"
	EventStateSnapshot           EventType = "STATE_SNAPSHOT"
	EventStateDelta              EventType = "STATE_DELTA"
	EventMessagesSnapshot        EventType = "MESSAGES_SNAPSHOT"
	EventSubagentStarted         EventType = "SUBAGENT_STARTED"
	EventSubagentFinished        EventType = "SUBAGENT_FINISHED"
	EventSubagentError           EventType = "SUBAGENT_ERROR"
	EventCustom                  EventType = "CUSTOM"
)

// Ends reports whether t closes a run.
func (t EventType) Ends() bool { return t == EventRunFinished || t == EventRunError }

// Event is one entry of a session's append-only log. The log is the source
// of truth; SSE streams and the JSON event pages are views of it.
type Event struct {
	// Seq is assigned by the durable append: strictly increasing per
	// session, with no gaps. Zero until the event is appended.
	Seq       int64
	SessionID string
	RunID     string
	Type      EventType
	Time      time.Time
	// Data is the AG-UI event object without its metadata member, e.g.
	// {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hi"}.
	Data json.RawMessage
	// Meta holds extra members of metadata.kerneld as a JSON object (for
	// example {"reason":"cancelled"}), or nil.
	Meta json.RawMessage
}

// AppendJSON appends the event's wire form to dst: the AG-UI object with an
// AG-UI timestamp and kerneld's envelope in metadata.kerneld (seq,
// sessionId, runId and any extra members). It is what JSON event pages and
// MarshalJSON give. It is on hot paths, so it splices bytes instead of
// re-marshalling the payload.
func (e *Event) AppendJSON(dst []byte) []byte { return e.appendJSON(dst, true) }

// AppendStreamJSON appends the form an SSE frame carries in its data line:
// AppendJSON's without metadata.kerneld.seq, which the frame's id line
// already states. A token event is sent thousands of times a run, so it
// says nothing twice.
func (e *Event) AppendStreamJSON(dst []byte) []byte { return e.appendJSON(dst, false) }

func (e *Event) appendJSON(dst []byte, withSeq bool) []byte {
	data := e.Data
	if len(data) < 2 || data[len(data)-1] != '}' {
		data = json.RawMessage(`{}`)
	}
	dst = append(dst, data[:len(data)-1]...)
	if len(data) > 2 {
		dst = append(dst, ',')
	}
	dst = append(dst, `"timestamp":`...)
	dst = strconv.AppendInt(dst, e.Time.UnixMilli(), 10)
	dst = append(dst, `,"metadata":{"kerneld":{`...)
	if withSeq {
		dst = append(dst, `"seq":`...)
		dst = strconv.AppendInt(dst, e.Seq, 10)
		dst = append(dst, ',')
	}
	dst = append(dst, `"sessionId":`...)
	dst = appendString(dst, PublicID(e.SessionID))
	dst = append(dst, `,"runId":`...)
	dst = appendString(dst, e.RunID)
	if len(e.Meta) > 2 && e.Meta[0] == '{' && e.Meta[len(e.Meta)-1] == '}' {
		dst = append(dst, ',')
		dst = append(dst, e.Meta[1:len(e.Meta)-1]...)
	}
	return append(dst, "}}}"...)
}

// MarshalJSON returns the event's wire form (see AppendJSON).
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(make([]byte, 0, len(e.Data)+128)), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s to dst as a JSON string. Like encoding/json it
// replaces invalid UTF-8 with U+FFFD and escapes U+2028 and U+2029, so the
// output is safe to embed in JavaScript; unlike it, it does not escape
// <, > and &, which SSE and JSON clients do not need.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
