package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// backlog is how many events ReadEvents10k reads per call.
const backlog = 10_000

// Benchmark runs the store benchmarks against the stores open returns,
// one fresh store per sub-benchmark. Appends dominate: every streamed
// token of every session is one.
func Benchmark(b *testing.B, open func(b *testing.B) kernel.Store) {
	benchmarks := []struct {
		name string
		fn   func(b *testing.B, st kernel.Store)
	}{
		{"AppendEvent", benchAppendEvent},
		{"AppendBatch16", benchAppendBatch16},
		{"AppendParallelSessions", benchAppendParallel},
		{"CreateSession", benchCreateSession},
		{"ReadEvents10k", benchReadEvents},
		{"RunStart", benchRunStart},
		{"RunStartParallel", benchRunStartParallel},
		{"HotReads", benchHotReads},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			bm.fn(b, open(b))
		})
	}
}

// tokenEvent returns a TEXT_MESSAGE_CONTENT event the size of a streamed
// token, of session sessionID.
func tokenEvent(sessionID string) session.Event {
	ev := session.TextMessageContent("0197a0c4-6f3e-7b7a-9c1d-2f8e5a4b3c21", "hello ")
	ev.SessionID, ev.RunID, ev.Time = sessionID, "0197a0c4-6f3e-7b7a-9c1d-2f8e5a4b3c22", time.Now()
	return ev
}

// benchAppend appends batches of size token events to one session.
func benchAppend(b *testing.B, st kernel.Store, size int) {
	s := mustCreateSession(b, st)
	ev := tokenEvent(s.ID)
	batch := make([]session.Event, size)
	ctx := b.Context()
	token := mustAcquire(b, st, s.ID, suiteHolder, suiteTTL)
	for b.Loop() {
		for i := range batch {
			batch[i] = ev
		}
		if err := st.AppendEvents(ctx, token, batch); err != nil {
			b.Fatal(err)
		}
	}
}

func benchAppendEvent(b *testing.B, st kernel.Store)   { benchAppend(b, st, 1) }
func benchAppendBatch16(b *testing.B, st kernel.Store) { benchAppend(b, st, 16) }

func benchAppendParallel(b *testing.B, st kernel.Store) {
	ctx := b.Context()
	b.RunParallel(func(pb *testing.PB) {
		s := newSession()
		if err := st.CreateSession(ctx, s); err != nil {
			b.Error(err)
			return
		}
		token, err := st.AcquireLease(ctx, s.ID, suiteHolder, suiteTTL)
		if err != nil {
			b.Error(err)
			return
		}
		batch := []session.Event{tokenEvent(s.ID)}
		ev := batch[0]
		for pb.Next() {
			batch[0] = ev
			if err := st.AppendEvents(ctx, token, batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchCreateSession(b *testing.B, st kernel.Store) {
	ctx := b.Context()
	sessions := make([]session.Session, b.N)
	for i := range sessions {
		sessions[i] = newSession()
	}
	b.ResetTimer()
	for i := range sessions {
		if err := st.CreateSession(ctx, sessions[i]); err != nil {
			b.Fatal(err)
		}
	}
}

func benchReadEvents(b *testing.B, st kernel.Store) {
	s := mustCreateSession(b, st)
	ctx := b.Context()
	token := mustAcquire(b, st, s.ID, suiteHolder, suiteTTL)
	for range backlog / 100 {
		batch := make([]session.Event, 100)
		for i := range batch {
			batch[i] = tokenEvent(s.ID)
		}
		require.NoError(b, st.AppendEvents(ctx, token, batch))
	}
	for b.Loop() {
		evs, err := st.ReadEvents(ctx, s.ID, 0, 0)
		if err != nil || len(evs) != backlog {
			b.Fatalf("read %d events, err %v", len(evs), err)
		}
	}
}
