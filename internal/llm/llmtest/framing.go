package llmtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bytewise runs r, putting what it writes on the wire a byte at a time,
// each flushed on its own, so that the client gets lines and events split
// over many reads, as slow networks and proxies split them.
func Bytewise(r Reply) Reply {
	return func(w http.ResponseWriter, req *http.Request) { r(bytewise{w}, req) }
}

type bytewise struct{ http.ResponseWriter }

func (b bytewise) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := b.ResponseWriter.Write(p[i : i+1]); err != nil {
			return i, err
		}
		b.Flush()
	}
	return len(p), nil
}

func (b bytewise) Flush() { b.ResponseWriter.(http.Flusher).Flush() }

// LineEndings runs r, ending its lines with end ("\r\n" or "\r") instead
// of "\n", as the event stream format allows. r must write "\n" only as a
// line ending, as JSON data lines do.
func LineEndings(r Reply, end string) Reply {
	return func(w http.ResponseWriter, req *http.Request) { r(lineEndings{w, end}, req) }
}

type lineEndings struct {
	http.ResponseWriter
	end string
}

func (l lineEndings) Write(p []byte) (int, error) {
	if _, err := l.ResponseWriter.Write([]byte(strings.ReplaceAll(string(p), "\n", l.end))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (l lineEndings) Flush() { l.ResponseWriter.(http.Flusher).Flush() }

// CheckFraming serves reply as it is, split a byte per read, and with CRLF
// and CR line endings, and checks that the client puts each back together
// as want says: how the stream is framed on the wire must not matter.
func (a Adapter) CheckFraming(t *testing.T, reply Reply, want Result) {
	framings := []struct {
		name  string
		reply Reply
	}{
		{"as sent", reply},
		{"a byte per read", Bytewise(reply)},
		{"CRLF", LineEndings(reply, "\r\n")},
		{"CR", LineEndings(reply, "\r")},
		{"CRLF, a byte per read", Bytewise(LineEndings(reply, "\r\n"))},
	}
	for _, f := range framings {
		t.Run(f.name, func(t *testing.T) { a.checkStream(t, f.reply, want) })
	}
}

// CheckStreamTimeout checks that the timeout option bounds an attempt's
// whole stream, not only the wait for its response: a stream that never
// ends fails the call once the time is up, having emitted its output
// once, without a retry, and the server sees the connection close.
func (a Adapter) CheckStreamTimeout(t *testing.T) {
	t.Helper()
	closed := make(chan struct{})
	s := NewServer(t, a.Slow(closed))
	start := time.Now()
	got, err := Collect(t, a.Dial(t, s, map[string]any{"timeout": "300ms", "max_retries": 2}), Hello)
	require.EqualError(t, err, a.Name+": no complete response within 300ms")
	assert.NotEmpty(t, got.Text, "the stream's output was emitted")
	assert.Less(t, time.Since(start), 3*time.Second)
	waitClosed(t, closed)
	assert.Len(t, s.Requests(), 1, "output had started: no retry")
}
