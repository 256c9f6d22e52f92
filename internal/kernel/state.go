package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// MaxStateBytes bounds a session's app state written over REST, as
// compact JSON text: an AG-UI app's state (a plan, a form, a document's
// outline), not a store of files.
const MaxStateBytes = 256 << 10

// SetSessionState replaces the app state of the caller's session id: the
// state the AG-UI route takes from RunAgentInput.state and sends as
// STATE_SNAPSHOT. Nothing is logged between runs, so the session's next
// run starts with a STATE_SNAPSHOT of it (unless that run brings a state
// of its own). A closed session refuses it.
func (k *Kernel) SetSessionState(ctx context.Context, id string, state json.RawMessage) (session.Session, error) {
	s, err := k.GetSession(ctx, id)
	if err != nil {
		return session.Session{}, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, state); err != nil {
		return session.Session{}, errdefs.Invalid("state", "not valid JSON")
	}
	if buf.Len() > MaxStateBytes {
		return session.Session{}, errdefs.Invalid("state", fmt.Sprintf("longer than %d bytes (compact JSON)", MaxStateBytes))
	}
	var out session.Session
	err = k.updateSession(ctx, s.ID, func(cur *session.Session) error {
		if cur.State == session.StateClosed {
			return sessionClosed(cur.ID)
		}
		cur.AgentState, cur.StateUnsent = buf.Bytes(), true
		cur.UpdatedAt = k.now().UTC()
		out = *cur
		return nil
	})
	if err != nil {
		return session.Session{}, err
	}
	out.Version++
	return out, nil
}

// unsentState returns the STATE_SNAPSHOT that tells run r's stream the
// state a client wrote to s over REST since its last run, if any; it
// clears the mark. A run that brings its own state sends that instead.
func unsentState(s *session.Session, r session.Run) []session.Event {
	if !s.StateUnsent {
		return nil
	}
	s.StateUnsent = false
	if r.AgentState != nil || s.AgentState == nil {
		return nil
	}
	return []session.Event{session.StateSnapshot(s.AgentState)}
}
