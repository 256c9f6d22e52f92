package storetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// activeStates are the states of a run that keeps a session busy, as the
// kernel asks for them before it starts another.
var activeStates = []session.RunState{session.RunRunning, session.RunWaitingInput, session.RunQueued}

// benchRunStart makes, one run after another, the store calls with which
// the kernel starts a run on an idle session and appends its first token:
// read the session and whether a run is active, take the lease, store the
// run and mark the session busy, append RUN_STARTED with the echoed input
// and record the input message, then read what the model's request is
// built from (session, running run, recent history, memory) and append the
// answer's first token. Each run has a fresh session, as in a burst of
// new conversations; the sessions are created before the timer starts.
func benchRunStart(b *testing.B, st kernel.Store) {
	ctx := b.Context()
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = mustCreateSession(b, st).ID
	}
	b.ResetTimer()
	cpu := CPUTime()
	for _, id := range ids {
		if err := StartRun(ctx, st, id); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// reportCPU reports the CPU time the process used since start per op,
// where it is measured.
func reportCPU(b *testing.B, start time.Duration) {
	if start > 0 {
		b.ReportMetric(float64(CPUTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

// benchRunStartParallel is benchRunStart from GOMAXPROCS goroutines at
// once, as concurrent requests start runs; sessions are created as they
// go, and not timed apart from the runs.
func benchRunStartParallel(b *testing.B, st kernel.Store) {
	ctx := b.Context()
	defer reportCPU(b, CPUTime())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s := newSession()
			if err := st.CreateSession(ctx, s); err != nil {
				b.Error(err)
				return
			}
			if err := StartRun(ctx, st, s.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// StartRun makes the store calls of one run's start on idle session id,
// as benchRunStart describes, for a backend's own benchmarks to measure
// what the suite cannot see (a store server's CPU, say).
func StartRun(ctx context.Context, st kernel.Store, id string) error {
	s, err := st.GetSession(ctx, id)
	if err != nil {
		return err
	}
	if _, err := st.ListRuns(ctx, id, session.RunQuery{States: activeStates, Limit: 1}); err != nil {
		return err
	}
	token, err := st.AcquireLease(ctx, id, suiteHolder, suiteTTL)
	if err != nil {
		return err
	}
	now := time.Now()
	run := session.Run{ID: newID(), SessionID: id, State: session.RunRunning, Input: "hello there",
		CreatedAt: now, StartedAt: now}
	if err := st.CreateRun(ctx, run, session.RunConstraints{}); err != nil {
		return err
	}
	s.State, s.ActiveRunID, s.UpdatedAt = session.StateRunning, run.ID, now
	if err := st.UpdateSession(ctx, s); err != nil {
		return err
	}
	input := inputEvents(id, run.ID, run.Input)
	if err := st.AppendEvents(ctx, token, input); err != nil {
		return err
	}
	run.StartSeq = input[0].Seq
	if err := st.UpdateRun(ctx, run); err != nil {
		return err
	}
	msg := session.Message{ID: session.NewMessageID(), SessionID: id, RunID: run.ID, Role: session.RoleUser,
		Content: run.Input, CreatedAt: now}
	if err := st.AppendMessages(ctx, token, msg); err != nil {
		return err
	}
	if err := readRequest(ctx, st, id); err != nil {
		return err
	}
	return st.AppendEvents(ctx, token, firstToken(id, run.ID))
}

// readRequest makes the reads a model request is built from.
func readRequest(ctx context.Context, st kernel.Store, id string) error {
	if _, err := st.GetSession(ctx, id); err != nil {
		return err
	}
	if _, err := st.ListRuns(ctx, id, session.RunQuery{States: []session.RunState{session.RunRunning}}); err != nil {
		return err
	}
	if _, err := st.RecentMessages(ctx, id, 200); err != nil {
		return err
	}
	_, err := st.ListMemory(ctx, id)
	return err
}

// inputEvents returns RUN_STARTED and the echoed user input of a run.
func inputEvents(sessionID, runID, input string) []session.Event {
	msgID := session.NewMessageID()
	evs := []session.Event{
		session.RunStarted(sessionID, runID),
		session.TextMessageStart(msgID, session.RoleUser),
		session.TextMessageContent(msgID, input),
		session.TextMessageEnd(msgID),
	}
	return stamp(evs, sessionID, runID)
}

// firstToken returns the start of a run's answer and its first token.
func firstToken(sessionID, runID string) []session.Event {
	msgID := session.NewMessageID()
	evs := []session.Event{
		session.TextMessageStart(msgID, session.RoleAssistant),
		session.TextMessageContent(msgID, "Hello"),
	}
	return stamp(evs, sessionID, runID)
}

func stamp(evs []session.Event, sessionID, runID string) []session.Event {
	now := time.Now()
	for i := range evs {
		evs[i].SessionID, evs[i].RunID, evs[i].Time = sessionID, runID, now
	}
	return evs
}

// Sizes of the session benchHotReads reads: a conversation of some
// length, since a read's cost may grow with what the session holds.
const (
	hotRuns     = 20
	hotEvents   = 50 // per run
	hotMemories = 5
)

// benchHotReads measures each read the kernel makes around every run, on
// a session that has had hotRuns runs, one sub-benchmark per read.
func benchHotReads(b *testing.B, st kernel.Store) {
	id, runs := fillSession(b, st)
	ctx := b.Context()
	last := runs[len(runs)-1]
	reads := []struct {
		name string
		read func() error
	}{
		{"GetSession", func() error { _, err := st.GetSession(ctx, id); return err }},
		{"GetRun", func() error { _, err := st.GetRun(ctx, id, last.ID); return err }},
		{"ListRunsActive", func() error {
			_, err := st.ListRuns(ctx, id, session.RunQuery{States: activeStates, Limit: 1})
			return err
		}},
		{"ListRunsQueued", func() error {
			_, err := st.ListRuns(ctx, id, session.RunQuery{States: []session.RunState{session.RunQueued}})
			return err
		}},
		{"RecentMessages", func() error { _, err := st.RecentMessages(ctx, id, 200); return err }},
		{"ListMemory", func() error { _, err := st.ListMemory(ctx, id); return err }},
		{"ReadLastEvent", func() error {
			_, err := st.ReadEvents(ctx, id, hotRuns*hotEvents-1, 1)
			return err
		}},
		{"FindRunByKey", func() error {
			_, err := st.FindRunByIdempotencyKey(ctx, id, last.IdempotencyKey, at(0))
			return err
		}},
	}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := CPUTime()
			for b.Loop() {
				if err := r.read(); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// fillSession stores a session with hotRuns ended runs, each with its
// input and answer messages and hotEvents events, and hotMemories memory
// entries; it returns the session's id and its runs, oldest first.
func fillSession(b *testing.B, st kernel.Store) (string, []session.Run) {
	ctx := b.Context()
	id := mustCreateSession(b, st).ID
	token := mustToken(b, st, id)
	runs := make([]session.Run, hotRuns)
	for i := range runs {
		runs[i] = newRun(id, func(r *session.Run) {
			r.State, r.IdempotencyKey, r.CreatedAt = session.RunSucceeded, "key-"+strconv.Itoa(i), at(i)
		})
		require.NoError(b, st.CreateRun(ctx, runs[i], session.RunConstraints{}))
		evs := make([]session.Event, hotEvents)
		for j := range evs {
			evs[j] = newEvent(id, runs[i].ID, j)
		}
		require.NoError(b, st.AppendEvents(ctx, token, evs))
		msgs := []session.Message{
			{ID: session.NewMessageID(), SessionID: id, RunID: runs[i].ID, Role: session.RoleUser, Content: "question", CreatedAt: at(i)},
			{ID: session.NewMessageID(), SessionID: id, RunID: runs[i].ID, Role: session.RoleAssistant, Content: "answer", CreatedAt: at(i)},
		}
		require.NoError(b, st.AppendMessages(ctx, token, msgs...))
	}
	for i := range hotMemories {
		require.NoError(b, st.PutMemory(ctx, newEntry(id, "key-"+strconv.Itoa(i), `"value"`), noLimit))
	}
	return id, runs
}
