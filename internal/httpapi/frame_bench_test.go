package httpapi

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// tokenEvent returns a token event as a run emits it, with ids of the
// length kerneld issues.
func tokenEvent(seq int64) session.Event {
	ev := session.TextMessageContent(session.NewMessageID(), " world")
	ev.Seq, ev.SessionID, ev.RunID, ev.Time = seq, session.NewID(), session.NewID(), time.Now()
	return ev
}

// BenchmarkAppendEventFrame measures encoding one token event as an SSE
// frame: done once per event for all live streams of its session, and
// once per event per stream replaying the log.
func BenchmarkAppendEventFrame(b *testing.B) {
	ev := tokenEvent(12345)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendEventFrame(buf[:0], &ev)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkFeed_Add measures what an append costs the hub: a batch of 64
// token events encoded once into the session's feed and offered to every
// stream of the session. Per event, it should not grow with the streams
// beyond waking each of them once per batch.
func BenchmarkFeed_Add(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			f := &feed{subs: make(map[*subscriber]struct{})}
			for range n {
				// Streams that keep up: the window is trimmed after each batch.
				f.subs[&subscriber{wake: make(chan struct{}, 1), sent: 1 << 62}] = struct{}{}
			}
			evs := make([]session.Event, 64)
			proto := tokenEvent(0)
			var seq int64
			b.ReportAllocs()
			for b.Loop() {
				for i := range evs {
					seq++
					evs[i] = proto
					evs[i].Seq = seq
				}
				f.add(evs, defaultFeedBytes)
			}
			b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkStream_WriteBatch measures a stream delivering the frames ready
// for it, 1, 16 and 256 at a time, to a client that keeps up: gathered
// into one write and one flush.
func BenchmarkStream_WriteBatch(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("frames=%d", n), func(b *testing.B) {
			f := &feed{subs: make(map[*subscriber]struct{})}
			sub := &subscriber{wake: make(chan struct{}, 1)}
			f.subs[sub] = struct{}{}
			w := &countingWriter{header: http.Header{}}
			hub := NewStreams(nil, StreamOptions{})
			st := &stream{hub: hub, w: w, rc: http.NewResponseController(w), f: f, sub: sub,
				caughtUp: true, idle: time.NewTimer(time.Hour)}
			evs := make([]session.Event, n)
			proto := tokenEvent(0)
			var seq int64
			b.ReportAllocs()
			for b.Loop() {
				for i := range evs {
					seq++
					evs[i] = proto
					evs[i].Seq = seq
				}
				f.add(evs, defaultFeedBytes)
				for more := true; more; {
					var drop dropReason
					if more, _, drop = st.step(b.Context()); drop != "" {
						b.Fatal(drop)
					}
				}
			}
			if st.sent != seq {
				b.Fatalf("sent %d of %d", st.sent, seq)
			}
			b.ReportMetric(float64(w.writes)/float64(b.N), "writes/op")
			b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}

// countingWriter is a client that takes everything at once.
type countingWriter struct {
	header http.Header
	writes int
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(int)             {}
func (w *countingWriter) Write(p []byte) (int, error) { w.writes++; return len(p), nil }
func (w *countingWriter) Flush()                      {}

func (w *countingWriter) SetWriteDeadline(time.Time) error { return nil }
