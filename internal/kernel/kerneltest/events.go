package kerneltest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// RunToEnd runs input in a new session of agent and returns the session's
// log once the run has ended.
func RunToEnd(tb testing.TB, k *kernel.Kernel, agent, input string) []session.Event {
	tb.Helper()
	s, err := k.CreateSession(tb.Context(), kernel.CreateSession{Agent: agent})
	if err != nil {
		tb.Fatalf("create session: %v", err)
	}
	return RunInSession(tb, k, s.ID, kernel.RunRequest{Input: input})
}

// RunInSession runs req in session id and returns the session's log once
// the run has ended.
func RunInSession(tb testing.TB, k *kernel.Kernel, id string, req kernel.RunRequest) []session.Event {
	tb.Helper()
	run, _, err := k.Run(tb.Context(), id, req)
	if err != nil {
		tb.Fatalf("run: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		evs, err := k.Events(tb.Context(), id, 0, 1000)
		if err != nil {
			tb.Fatalf("events: %v", err)
		}
		if n := len(evs); n > 0 && evs[n-1].Type.Ends() && evs[n-1].RunID == run.ID {
			return evs
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatal("the run did not end")
	return nil
}

// Types lists the events' types, as text for readable comparisons.
func Types(evs []session.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Type)
	}
	return out
}

// Shape returns the event types of evs with consecutive repeats merged:
// how a model splits its text into deltas is its own affair, so runs of
// different providers with the same steps have the same shape.
func Shape(evs []session.Event) []string {
	return slices.Compact(Types(evs))
}

// Member returns a member of the first event of type typ, as JSON text.
func Member(tb testing.TB, evs []session.Event, typ session.EventType, name string) string {
	tb.Helper()
	for _, ev := range evs {
		if ev.Type == typ {
			b, err := json.Marshal(ev.Fields()[name])
			if err != nil {
				tb.Fatalf("marshal %s.%s: %v", typ, name, err)
			}
			return string(b)
		}
	}
	tb.Fatalf("no %s event", typ)
	return ""
}
