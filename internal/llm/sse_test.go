package llm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
)

// event is an llm.SSEEvent with its data copied, for comparing.
type event struct{ Name, Data string }

// readAll reads every event of src and the error that ended the stream.
func readAll(src io.Reader) ([]event, error) {
	r := llm.NewSSEReader(src)
	var out []event
	for {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, event{ev.Name, string(ev.Data)})
	}
}

// TestSSEReader_Next covers the event stream format as the HTML standard
// defines it and as model APIs and the proxies before them send it.
func TestSSEReader_Next(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []event
	}{
		{"data only", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []event{{"", `{"a":1}`}, {"", "[DONE]"}}},
		{"event line before data", "event: message_start\ndata: {}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
			[]event{{"message_start", "{}"}, {"ping", `{"type": "ping"}`}}},
		{"event line after data", "data: x\nevent: late\n\n", []event{{"late", "x"}}},
		{"CRLF", "event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n", []event{{"a", "1"}, {"", "2"}}},
		{"CR", "event: a\rdata: 1\r\rdata: 2\r\r", []event{{"a", "1"}, {"", "2"}}},
		{"mixed line endings", "data: 1\r\n\ndata: 2\r\r\ndata: 3\n\r", []event{{"", "1"}, {"", "2"}, {"", "3"}}},
		{"comments and keep-alives", ": keep-alive\n\n: OPENROUTER PROCESSING\ndata: 1\n: inside\n\n:\n\n", []event{{"", "1"}}},
		{"several data lines", "data: first\ndata:second\ndata\ndata:  third\n\n", []event{{"", "first\nsecond\n\n third"}}},
		{"no space after the colon", "event:e\ndata:{}\n\n", []event{{"e", "{}"}}},
		{"empty data is an event", "data:\n\n", []event{{"", ""}}},
		{"an event without data is skipped, and its name with it", "event: a\n\nid: 7\nretry: 100\n\ndata: 1\n\n", []event{{"", "1"}}},
		{"unknown fields are ignored", "foo: bar\ndata: 1\nid: 3\n\n", []event{{"", "1"}}},
		{"the name does not carry over", "event: a\ndata: 1\n\ndata: 2\n\nevent: a\ndata: 3\n\n", []event{{"a", "1"}, {"", "2"}, {"a", "3"}}},
		{"leading blank lines", "\n\ndata: 1\n\n", []event{{"", "1"}}},
		{"an event cut off by the end of the stream is dropped", "data: 1\n\ndata: 2\n", []event{{"", "1"}}},
		{"a line cut off by the end of the stream is dropped", "data: 1\n\ndata: 2", []event{{"", "1"}}},
		{"empty stream", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(strings.NewReader(tt.stream))
			require.ErrorIs(t, err, io.EOF)
			assert.Equal(t, tt.want, got)

			got, err = readAll(iotest.OneByteReader(strings.NewReader(tt.stream)))
			require.ErrorIs(t, err, io.EOF)
			assert.Equal(t, tt.want, got, "read a byte at a time")
		})
	}
}

// TestSSEReader_Next_Splits: however the stream is split into reads (TCP
// segments), the events are the same; an event is returned as soon as its
// blank line has been read, without waiting for more input.
func TestSSEReader_Next_Splits(t *testing.T) {
	stream := "event: a\r\ndata: {\"text\":\"héllo\"}\r\n\r\n: ping\n\ndata: 1\rdata: 2\r\r" +
		"data: " + strings.Repeat("x", 300) + "\n\n"
	want, err := readAll(strings.NewReader(stream))
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, want, 3)
	for i := range len(stream) {
		got, err := readAll(io.MultiReader(strings.NewReader(stream[:i]), strings.NewReader(stream[i:])))
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, want, got, "split at %d", i)
	}

	pr, pw := io.Pipe()
	defer func() { _ = pr.Close() }()
	go func() { _, _ = io.WriteString(pw, "data: 1\n\n") }() // then the writer stays open
	ev, err := llm.NewSSEReader(pr).Next()
	require.NoError(t, err)
	assert.Equal(t, "1", string(ev.Data), "returned before the stream goes on")
}

// TestSSEReader_Next_LongLines: a line longer than the reader's buffer is
// read whole, up to llm.MaxSSELine; a longer one fails the stream rather
// than growing without bound.
func TestSSEReader_Next_LongLines(t *testing.T) {
	long := strings.Repeat("abcdefgh", 200_000) // 1.6 MB, one line
	got, err := readAll(strings.NewReader("data: " + long + "\r\n\r\ndata: after\n\n"))
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, []event{{"", long}, {"", "after"}}, got)

	tooLong := io.MultiReader(strings.NewReader("data: "), endless('x'))
	_, err = readAll(tooLong)
	require.ErrorIs(t, err, llm.ErrSSETooLong)

	line := "data: " + strings.Repeat("y", 1<<20) + "\n"
	manyLines := io.MultiReader(strings.NewReader(strings.Repeat(line, 9)), endless('\n'))
	_, err = readAll(manyLines)
	require.ErrorIs(t, err, llm.ErrSSETooLong, "the limit holds for an event's data too")
}

// endless is a reader of c, over and over.
func endless(c byte) io.Reader { return endlessReader(bytes.Repeat([]byte{c}, 64<<10)) }

type endlessReader []byte

func (r endlessReader) Read(p []byte) (int, error) { return copy(p, r), nil }

// TestSSEReader_Next_SourceError: the source's error ends the stream,
// after the events read before it.
func TestSSEReader_Next_SourceError(t *testing.T) {
	reset := errors.New("connection reset")
	src := io.MultiReader(strings.NewReader("data: 1\n\ndata: 2\n"), iotest.ErrReader(reset))
	got, err := readAll(src)
	require.ErrorIs(t, err, reset)
	assert.Equal(t, []event{{"", "1"}}, got)
}

// FuzzSSEReader: reading a stream in two pieces gives the events reading
// it whole gives, and the reader never fails on its own.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("event: a\r\ndata: 1\r\n\r\n: c\rdata: 2\r\r"), uint16(3))
	f.Add([]byte("data:x\ndata\n\nevent:\n\n"), uint16(9))
	f.Fuzz(func(t *testing.T, stream []byte, at uint16) {
		want, err := readAll(bytes.NewReader(stream))
		require.ErrorIs(t, err, io.EOF)
		i := int(at) % (len(stream) + 1)
		got, err := readAll(io.MultiReader(bytes.NewReader(stream[:i]), bytes.NewReader(stream[i:])))
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, want, got)
	})
}

// TestJSONDecoder_Decode: events decode as json.Unmarshal decodes them,
// errors read as its errors, and an event that fails leaves the next one
// unharmed.
func TestJSONDecoder_Decode(t *testing.T) {
	type msg struct {
		Text string `json:"text"`
		N    int    `json:"n"`
	}
	events := []string{
		`{"text":"a","n":1}`,
		` { "text" : "b" } `,
		`{"text":"c",`,
		`{"n":2}`,
		`{"text":"d"}{"text":"e"}`,
		`{"text":"f"}`,
		`{"n":"three"}`,
		`{"text":"g"}`,
	}
	var d llm.JSONDecoder
	for _, data := range events {
		var want, got msg
		wantErr := json.Unmarshal([]byte(data), &want)
		err := d.Decode([]byte(data), &got)
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error(), "decoding %s", data)
			continue
		}
		require.NoError(t, err, "decoding %s", data)
		assert.Equal(t, want, got, "decoding %s", data)
	}
}
