package redis

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// Replies that carry events (XRANGE, XREAD) are read raw and parsed here
// rather than through go-redis' typed commands, which build a map and
// several strings per stream entry: replaying 10k events that way costs
// ~15 allocations an event. Here the events' Data and Meta point into the
// one buffer the reply was read into, which nothing else uses.

// respReader parses a RESP2 or RESP3 reply held in memory.
type respReader struct {
	b   []byte
	pos int
}

var errShortReply = errors.New("malformed redis reply")

// header reads the type byte and the rest of the line of the next element.
func (r *respReader) header() (byte, []byte, error) {
	end := bytes.Index(r.b[r.pos:], []byte("\r\n"))
	if end < 1 {
		return 0, nil, errShortReply
	}
	kind, line := r.b[r.pos], r.b[r.pos+1:r.pos+end]
	r.pos += end + 2
	if kind == '-' || kind == '!' {
		return 0, nil, fmt.Errorf("redis: %s", line)
	}
	return kind, line, nil
}

// count reads the header of an aggregate and returns how many elements
// follow: a map's pairs count twice. A null reply (RESP2 *-1, RESP3 _) is
// -1.
func (r *respReader) count() (int, error) {
	kind, line, err := r.header()
	if err != nil {
		return 0, err
	}
	switch kind {
	case '_':
		return -1, nil
	case '*', '%', '~':
		n, err := strconv.Atoi(string(line))
		if err != nil {
			return 0, errShortReply
		}
		if kind == '%' {
			n *= 2
		}
		return max(n, -1), nil
	}
	return 0, fmt.Errorf("redis: unexpected reply type %q where an array belongs", kind)
}

// str reads a bulk or simple string and returns it, pointing into the
// reply, capped so that appending to it cannot overwrite what follows.
func (r *respReader) str() ([]byte, error) {
	kind, line, err := r.header()
	if err != nil {
		return nil, err
	}
	switch kind {
	case '+':
		return line[:len(line):len(line)], nil
	case '$':
		n, err := strconv.Atoi(string(line))
		if err != nil || n < 0 || r.pos+n+2 > len(r.b) {
			return nil, errShortReply
		}
		s := r.b[r.pos : r.pos+n : r.pos+n]
		r.pos += n + 2
		return s, nil
	}
	return nil, fmt.Errorf("redis: unexpected reply type %q where a string belongs", kind)
}

// entryReader turns stream entries into events of one session. It interns
// run ids and types, which repeat from one event to the next.
type entryReader struct {
	respReader
	intern map[string]string
	arena  []byte // see alloc
}

func newEntryReader(reply []byte) *entryReader {
	return &entryReader{respReader: respReader{b: reply}, intern: make(map[string]string, 4)}
}

// name returns b as a string, allocating only the first time it is seen.
func (r *entryReader) name(b []byte) string {
	if s, ok := r.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	r.intern[s] = s
	return s
}

// entries reads an array of stream entries and returns the events in them
// with seq > after, as events of session sessionID.
func (r *entryReader) entries(sessionID string, after int64) ([]session.Event, error) {
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	out := make([]session.Event, 0, n) // one event an entry or more
	for range n {
		first := len(out)
		if out, err = r.entry(out, sessionID); err != nil {
			return nil, err
		}
		if skip := after - out[first].Seq + 1; skip > 0 { // an entry the cursor is inside
			out = append(out[:first], out[first+int(min(skip, int64(len(out)-first))):]...)
		}
	}
	return out, nil
}

// entry reads one stream entry, [id, [field, value, ...]], and appends
// its events to out: those packed in its field "e", or the one event of a
// log written before entries were packed, one field a member.
func (r *entryReader) entry(out []session.Event, sessionID string) ([]session.Event, error) {
	if n, err := r.count(); err != nil || n != 2 {
		return nil, cmpErr(err, errShortReply)
	}
	id, err := r.str()
	if err != nil {
		return nil, err
	}
	seq, err := seqOf(id)
	if err != nil {
		return nil, err
	}
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	ev := session.Event{SessionID: sessionID, Seq: seq}
	packed := false
	for i := 0; i < n; i += 2 {
		field, err := r.str()
		if err != nil {
			return nil, err
		}
		value, err := r.str()
		if err != nil {
			return nil, err
		}
		if string(field) == "e" {
			if out, err = r.unpackEntry(out, value, sessionID, seq); err != nil {
				return nil, err
			}
			packed = true
		} else if err := r.legacyField(&ev, field, value); err != nil {
			return nil, err
		}
	}
	if !packed {
		out = append(out, ev)
	}
	return out, nil
}

// legacyField sets the event field that a field of an entry of one event
// names: r (run id), t (type), ts (time in microseconds), d (data), m
// (meta), as kerneld wrote them before it packed entries.
func (r *entryReader) legacyField(ev *session.Event, field, value []byte) error {
	switch string(field) {
	case "r":
		ev.RunID = r.name(value)
	case "t":
		ev.Type = session.EventType(r.name(value))
	case "ts":
		us, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil {
			return fmt.Errorf("event %d: time %q", ev.Seq, value)
		}
		ev.Time = time.UnixMicro(us).UTC()
	case "d":
		ev.Data = nilIfEmpty(value)
	case "m":
		ev.Meta = nilIfEmpty(value)
	}
	return nil
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// seqOf returns the seq of the stream entry id "<seq>-0".
func seqOf(id []byte) (int64, error) {
	ms, _, _ := bytes.Cut(id, []byte("-"))
	seq, err := strconv.ParseInt(string(ms), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stream entry id %q: %w", id, errShortReply)
	}
	return seq, nil
}

// cmpErr returns err, or fallback if err is nil.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}
