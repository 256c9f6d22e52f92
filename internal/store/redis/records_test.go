package redis

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
)

// Records are stored as the JSON of session.Session, session.Run and
// session.Message, so their Go field names are the stored schema. These
// records were written by this store; they must still decode to the same
// values. A new field passes (old records lack it and read it as zero);
// a renamed or removed field fails here, and needs a json tag keeping the
// old name or a migration of the stored records.

const (
	storedSession = `{"ID":"s1","Tenant":"acme","Agent":"helper","Name":"n","Metadata":{"a":"1"},"State":"running","ParentID":"p","RootID":"r","Depth":1,"CreatedAt":"2025-03-14T15:09:26.535897+02:00","UpdatedAt":"2025-03-14T15:09:27.535897+02:00","LastSeq":0,"ActiveRunID":"run1","TTL":3600000000000,"ExpiresAt":"2025-03-14T16:09:26.535897+02:00","InheritMemory":"copy","ForkedFrom":"f","Version":3,"fork_position":7,"closed_reason":"done","agent_state":{"a":[1,2]},"overrides":{"model":"m","reasoning_effort":"low","temperature":0,"max_tokens":100}}`
	storedRun     = `{"ID":"run1","SessionID":"s1","State":"failed","Input":"hi","IdempotencyKey":"k","CreatedAt":"2025-03-14T15:09:26.535897+02:00","StartedAt":"2025-03-14T15:09:27.535897+02:00","EndedAt":"2025-03-14T15:09:28.535897+02:00","Error":{"Code":"timeout","Message":"run timed out"},"Usage":{"InputTokens":10,"OutputTokens":20},"StartSeq":1,"EndSeq":7,"Version":2,"if_busy":"steer","steered_into":"run0","cancel_requested":true,"decisions":[{"tool_call_id":"c1","approve":false,"reason":"no","at":"2025-03-14T15:09:26.535897+02:00"}],"model":"m","overrides":{"temperature":0.5}}`
	storedMessage = `{"ID":"m1","SessionID":"s1","Position":0,"RunID":"run1","Role":"assistant","Content":"c","ToolCalls":[{"ID":"c1","Name":"t","Arguments":"{}"}],"ToolCallID":"c2","IsError":true,"CreatedAt":"2025-03-14T15:09:26.535897+02:00"}`
)

func TestStoredRecordsStayReadable(t *testing.T) {
	at := time.Date(2025, 3, 14, 13, 9, 26, 535897000, time.UTC)
	zero, hundred, half := 0.0, 100, 0.5
	sess, ok, err := decodeSession([]any{storedSession, "42"})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, session.Session{ID: "s1", Tenant: "acme", Agent: "helper", Name: "n",
		Metadata: map[string]string{"a": "1"}, State: session.StateRunning, ParentID: "p", RootID: "r",
		Depth: 1, CreatedAt: at, UpdatedAt: at.Add(time.Second), LastSeq: 42, ActiveRunID: "run1",
		TTL: time.Hour, ExpiresAt: at.Add(time.Hour), InheritMemory: "copy", ForkedFrom: "f", Version: 3,
		SessionExt: session.SessionExt{ForkPosition: 7, ClosedReason: "done", AgentState: json.RawMessage(`{"a":[1,2]}`),
			Overrides: &session.Overrides{Model: "m", ReasoningEffort: "low", Temperature: &zero, MaxTokens: &hundred}},
	}, utcSession(sess))

	run, err := decodeRun(storedRun)
	require.NoError(t, err)
	assert.Equal(t, session.Run{ID: "run1", SessionID: "s1", State: session.RunFailed, Input: "hi",
		IdempotencyKey: "k", CreatedAt: at, StartedAt: at.Add(time.Second), EndedAt: at.Add(2 * time.Second),
		Error: &session.RunError{Code: "timeout", Message: "run timed out"},
		Usage: session.Usage{InputTokens: 10, OutputTokens: 20}, StartSeq: 1, EndSeq: 7, Version: 2,
		RunExt: session.RunExt{IfBusy: "steer", SteeredInto: "run0", CancelRequested: true, Model: "m",
			Decisions: []session.Decision{{ToolCallID: "c1", Reason: "no", At: at}},
			Overrides: &session.Overrides{Temperature: &half}},
	}, utcRun(run))

	msgs, err := decodeMessages([]string{storedMessage}, 5)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	msgs[0].CreatedAt = msgs[0].CreatedAt.UTC()
	assert.Equal(t, session.Message{ID: "m1", SessionID: "s1", Position: 5, RunID: "run1",
		Role: session.RoleAssistant, Content: "c", ToolCalls: []session.ToolCall{{ID: "c1", Name: "t", Arguments: "{}"}},
		ToolCallID: "c2", IsError: true, CreatedAt: at}, msgs[0])
}

func utcSession(s session.Session) session.Session {
	s.CreatedAt, s.UpdatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC(), s.ExpiresAt.UTC()
	return s
}

func utcRun(r session.Run) session.Run {
	r.CreatedAt, r.StartedAt, r.EndedAt = r.CreatedAt.UTC(), r.StartedAt.UTC(), r.EndedAt.UTC()
	for i := range r.Decisions {
		r.Decisions[i].At = r.Decisions[i].At.UTC()
	}
	return r
}
