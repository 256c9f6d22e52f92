package session_test

import (
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

func TestStatusOf(t *testing.T) {
	for state, want := range map[session.State]session.Status{
		session.StateActive: session.StatusIdle, session.StateCompleted: session.StatusIdle,
		session.StateRunning: session.StatusRunning, session.StateWaitingInput: session.StatusWaitingInput,
		session.StateError: session.StatusFailed, session.StateClosed: session.StatusClosed,
	} {
		if got := session.StatusOf(&session.Session{State: state}); got != want {
			t.Errorf("StatusOf(%s) = %s, want %s", state, got, want)
		}
	}
	for state, want := range map[session.RunState]session.Status{
		session.RunQueued: session.StatusQueued, session.RunRunning: session.StatusRunning,
		session.RunWaitingInput: session.StatusWaitingInput, session.RunSucceeded: session.StatusIdle,
		session.RunCancelled: session.StatusIdle, session.RunSteered: session.StatusIdle,
		session.RunFailed: session.StatusFailed, session.RunInterrupted: session.StatusFailed,
	} {
		if got := session.RunStatusOf(&session.Run{State: state}); got != want {
			t.Errorf("RunStatusOf(%s) = %s, want %s", state, got, want)
		}
	}
}

func TestStalls(t *testing.T) {
	now := time.Now()
	at := func(ev session.Event, ago time.Duration) *session.Event {
		ev.Time = now.Add(-ago)
		return &ev
	}
	delta := session.TextMessageContent("m", "x")
	tests := []struct {
		name string
		last *session.Event
		want bool
	}{
		{"no event", nil, false},
		{"recent", at(delta, time.Second), false},
		{"quiet", at(delta, time.Minute), true},
		{"its notice, just logged", at(session.Custom(session.CustomRunStalled, nil), 0), true},
		{"another notice", at(session.Custom("kerneld.run.queued", nil), time.Second), false},
		{"the run's end, long ago", at(session.RunErrored("x", "y", session.Usage{}), time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := session.Stalls(tt.last, now, 30*time.Second); got != tt.want {
				t.Errorf("Stalls = %v, want %v", got, tt.want)
			}
		})
	}
}
