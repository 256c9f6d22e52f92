package session_test

import (
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// BenchmarkTextMessageContent measures building one token event.
func BenchmarkTextMessageContent(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = session.TextMessageContent("01a1fcb4-9e65-74cb-a8a2-96211192cd2c", " world")
	}
}

// BenchmarkAppendJSON measures encoding one token event with its envelope,
// the wire form every stream and page sends.
func BenchmarkAppendJSON(b *testing.B) {
	ev := session.TextMessageContent("01a1fcb4-9e65-74cb-a8a2-96211192cd2c", " world")
	ev.Seq, ev.SessionID, ev.RunID, ev.Time = 42, "01a1fcb4-9deb-765c-8ab7-26f26d659441", "01a1fcb4-9e65-7072-b822-183a5c12a4ce", time.Now()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = ev.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}
