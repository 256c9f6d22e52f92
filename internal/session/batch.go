package session

import "github.com/kerneld/kerneld/internal/errdefs"

// EventsOfOneSession returns the id of the session evs belong to, or
// ErrInvalid (code mixed_sessions) when they name more than one: the
// stores append one session's batch at a time, under its lease. evs must
// not be empty.
func EventsOfOneSession(evs []Event) (string, error) {
	return oneSession(evs, func(ev *Event) string { return ev.SessionID }, "event")
}

// MessagesOfOneSession is EventsOfOneSession for messages.
func MessagesOfOneSession(msgs []Message) (string, error) {
	return oneSession(msgs, func(m *Message) string { return m.SessionID }, "message")
}

func oneSession[T any](batch []T, sessionOf func(*T) string, what string) (string, error) {
	id := sessionOf(&batch[0])
	for i := 1; i < len(batch); i++ {
		if other := sessionOf(&batch[i]); other != id {
			return "", errdefs.New(errdefs.ErrInvalid, errdefs.CodeMixedSessions, "%s batch mixes sessions %s and %s", what, id, other)
		}
	}
	return id, nil
}
