package session_test

import (
	"encoding/json"
	"testing"

	"github.com/kerneld/kerneld/internal/session"
)

// TestMessagesSnapshot_Agent: an assistant message another agent than the
// session's wrote names it; the session's own agent's do not, as
// RUN_STARTED names only another agent.
func TestMessagesSnapshot_Agent(t *testing.T) {
	ev := session.MessagesSnapshot([]session.Message{
		{ID: "u1", Role: session.RoleUser, Content: "a haiku", RunID: "r1"},
		{ID: "a1", Role: session.RoleAssistant, Content: "Draft", RunID: "r1", Agent: "writer"},
		{ID: "a2", Role: session.RoleAssistant, Content: "Critique", RunID: "r2", Agent: "critic"},
	}, "writer")
	var body struct {
		Messages []struct {
			ID       string `json:"id"`
			Metadata struct {
				Kerneld map[string]any `json:"kerneld"`
			} `json:"metadata"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(ev.Data, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"u1": nil, "a1": nil, "a2": "critic"}
	for _, m := range body.Messages {
		if got := m.Metadata.Kerneld["agent"]; got != want[m.ID] {
			t.Errorf("message %s: metadata.kerneld.agent = %v, want %v", m.ID, got, want[m.ID])
		}
	}
}
