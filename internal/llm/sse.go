package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// SSEEvent is one event of a server-sent event stream.
type SSEEvent struct {
	// Name is the event's "event:" field; "" when it has none.
	Name string
	// Data is its "data:" lines joined with "\n". It is only valid until
	// the next call to Next.
	Data []byte
}

// Sizes of what an SSEReader holds.
const (
	// sseBufferSize is the buffer a stream is read into; a line that does
	// not fit grows a buffer of its own.
	sseBufferSize = 4 << 10
	// MaxSSELine bounds a line, and an event's data, of an event stream.
	// It is far above any event a model API sends (a whole tool call's
	// arguments at most) and bounds what a broken server can make kerneld
	// hold in memory.
	MaxSSELine = 8 << 20
)

// ErrSSETooLong is the error of an event stream with a line or an event
// longer than MaxSSELine.
var ErrSSETooLong = errors.New("event stream line or event longer than 8 MiB")

// SSEReader reads the events of a text/event-stream body, as the WHATWG
// HTML standard defines the format: lines end with LF, CRLF or CR, a blank
// line ends an event, a line starting with ':' is a comment (servers send
// them as keep-alives), "event:" names the event and "data:" lines make
// its data. The id and retry fields are ignored: a model call is never
// resumed, it is retried whole.
//
// An event is returned as soon as the blank line that ends it has been
// read, without waiting for more input, however the stream was split into
// reads. A leading byte order mark is not stripped: model APIs send none.
type SSEReader struct {
	src    io.Reader
	buf    []byte // buffered input: unread bytes are buf[r:w]
	r, w   int
	err    error  // the source's error, returned once buf is used up
	skipLF bool   // the last line ended with CR: an LF right after it belongs to it
	long   []byte // the start of a line longer than buf

	name []byte // the event being read: its name and data
	data []byte
	last string // the name of the latest event returned, reused when the next has the same
}

// NewSSEReader returns a reader of the events in src.
func NewSSEReader(src io.Reader) *SSEReader {
	return &SSEReader{src: src, buf: make([]byte, sseBufferSize)}
}

// Next returns the next event that has data; events without data are
// skipped, as the standard says. At the end of the stream it returns
// io.EOF: an event not yet ended by a blank line when the source ends is
// dropped, since a stream cut short must not look complete. Any other
// error is the source's, or ErrSSETooLong.
func (s *SSEReader) Next() (SSEEvent, error) {
	s.name, s.data = s.name[:0], s.data[:0]
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			return SSEEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				return SSEEvent{Name: s.eventName(), Data: s.data}, nil
			}
			s.name = s.name[:0]
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value, _ = bytes.CutPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			s.name = append(s.name[:0], value...)
		case "data":
			if hasData {
				s.data = append(s.data, '\n')
			}
			if len(s.data)+len(value) > MaxSSELine {
				return SSEEvent{}, ErrSSETooLong
			}
			s.data = append(s.data, value...)
			hasData = true
		}
		// "" (a comment), id, retry and unknown fields are ignored.
	}
}

// eventName returns the name of the event read, as a string that is only
// allocated when it differs from the previous event's: streams repeat a
// few names.
func (s *SSEReader) eventName() string {
	if string(s.name) != s.last {
		s.last = string(s.name)
	}
	return s.last
}

// line returns the next line without its line ending. The line is only
// valid until the next call.
func (s *SSEReader) line() ([]byte, error) {
	s.long = s.long[:0]
	for {
		if s.skipLF && s.r < s.w {
			if s.buf[s.r] == '\n' {
				s.r++
			}
			s.skipLF = false
		}
		if i := lineEnd(s.buf[s.r:s.w]); i >= 0 {
			line := s.buf[s.r : s.r+i]
			s.skipLF = s.buf[s.r+i] == '\r'
			s.r += i + 1
			if len(s.long) > 0 {
				line = append(s.long, line...)
				s.long = line
			}
			if len(line) > MaxSSELine {
				return nil, ErrSSETooLong
			}
			return line, nil
		}
		if s.err != nil {
			return nil, s.err
		}
		if err := s.fill(); err != nil {
			return nil, err
		}
	}
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	n := i
	if n < 0 {
		n = len(b)
	}
	if j := bytes.IndexByte(b[:n], '\r'); j >= 0 {
		return j
	}
	return i
}

// fill reads more input. A line that fills the whole buffer moves to
// s.long, so a long line costs its own length and no more.
func (s *SSEReader) fill() error {
	if s.r > 0 {
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	}
	if s.w == len(s.buf) {
		if len(s.long)+s.w > MaxSSELine {
			return ErrSSETooLong
		}
		s.long = append(s.long, s.buf...)
		s.w = 0
	}
	n, err := s.src.Read(s.buf[s.w:])
	s.w += n
	if err != nil {
		s.err = err
	}
	return nil
}

// JSONDecoder decodes the JSON data of one event after another. It keeps
// one json.Decoder, whose buffers and parser state are reused from event
// to event, where json.Unmarshal allocates them afresh for each of the
// hundreds of events of a response. The zero value is ready to use.
type JSONDecoder struct {
	src bytes.Reader
	dec *json.Decoder
	fed int64 // bytes handed to dec so far
}

// Decode decodes data, which must be one JSON value and nothing else,
// into v. On any trouble (malformed data, a second value) it leaves the
// answer to json.Unmarshal, so that errors read as json.Unmarshal's, and
// starts afresh with the next event.
func (d *JSONDecoder) Decode(data []byte, v any) error {
	if d.dec == nil {
		d.dec, d.fed = json.NewDecoder(&d.src), 0
	}
	d.src.Reset(data)
	d.fed += int64(len(data))
	if err := d.dec.Decode(v); err == nil && d.dec.InputOffset() == d.fed {
		return nil
	}
	d.dec = nil
	return json.Unmarshal(data, v)
}
