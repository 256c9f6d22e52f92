package httpapi

import (
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// BenchmarkAppendEventFrame measures encoding one token event as an SSE
// frame, the work done per event per replayed stream.
func BenchmarkAppendEventFrame(b *testing.B) {
	ev := session.TextMessageContent("01a1fcb4-9e65-74cb-a8a2-96211192cd2c", " world")
	ev.Seq, ev.SessionID, ev.RunID, ev.Time = 42, "01a1fcb4-9deb-765c-8ab7-26f26d659441", "01a1fcb4-9e65-7072-b822-183a5c12a4ce", time.Now()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendEventFrame(buf[:0], &ev)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkParseFrame measures reading back a live frame from r3labs.
func BenchmarkParseFrame(b *testing.B) {
	frame := []byte("id: 42 01a1fcb4-9e65-7072-b822-183a5c12a4ce\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"delta\":\" world\"}\nevent: TEXT_MESSAGE_CONTENT\n\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, _, ok := parseFrame(frame); !ok {
			b.Fatal("not parsed")
		}
	}
}
