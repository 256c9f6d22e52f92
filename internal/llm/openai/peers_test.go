package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// peerAgent is an agent on the fake server that takes turns with peers.
func peerAgent(s *llmtest.Server, name, peers string) string {
	return `
name: ` + name + `
model: {provider: openai, name: gpt-4o-mini, base_url: ` + baseURL(s) + `, api_key: ` + testKey + `}
system_prompt: You are ` + name + `.
peers: [` + peers + `]
`
}

// TestKernel_AgentsTakeTurns: two agents alternate on one history; each
// sees the other's answers under the other's name, and the log and the
// history say who spoke.
func TestKernel_AgentsTakeTurns(t *testing.T) {
	answer := func(text string) llmtest.Reply {
		return stream(roleChunk(), textChunk(text), finishChunk("stop"), usageChunk(10, 2), done)
	}
	s := llmtest.NewServer(t, answer("Hello from Alice."), answer("Bob here."), answer("Bye from Alice."))
	k := mustKernel(t, peerAgent(s, "alice", "bob"), peerAgent(s, "bob", "alice"), peerAgent(s, "carol", "alice"))
	ctx := t.Context()

	_, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "alice", Agents: []string{"carol"}})
	assert.Equal(t, errdefs.CodeAgentNotAllowed, errdefs.CodeOf(err), "alice does not name carol in peers")
	sess, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "alice", Agents: []string{"bob"}})
	require.NoError(t, err)
	_, _, err = k.Run(ctx, sess.ID, kernel.RunRequest{Input: "hi", Agent: "carol"})
	assert.Equal(t, errdefs.CodeAgentNotAllowed, errdefs.CodeOf(err), "the session does not list carol")

	kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "Hi all."})
	kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "Bob, you?", Agent: "bob"})
	evs := kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "Thanks."})
	aguitest.Verify(t, evs)

	reqs := s.Requests()
	require.Len(t, reqs, 3)
	assert.JSONEq(t, `[{"role":"system","content":"You are alice."},{"role":"user","content":"Hi all."}]`,
		reqs[0].Member(t, "messages"), "one agent so far: no names")
	assert.JSONEq(t, `[{"role":"system","content":"You are bob."},{"role":"user","content":"Hi all."},
		{"role":"assistant","name":"alice","content":"Hello from Alice."},{"role":"user","content":"Bob, you?"}]`,
		reqs[1].Member(t, "messages"), "bob sees the history under alice's name, with his own prompt")
	assert.JSONEq(t, `[{"role":"system","content":"You are alice."},{"role":"user","content":"Hi all."},
		{"role":"assistant","name":"alice","content":"Hello from Alice."},{"role":"user","content":"Bob, you?"},
		{"role":"assistant","name":"bob","content":"Bob here."},{"role":"user","content":"Thanks."}]`,
		reqs[2].Member(t, "messages"))

	runs, err := k.ListRuns(ctx, sess.ID, kernel.PageRequest{})
	require.NoError(t, err)
	require.Len(t, runs.Items, 3)
	assert.Equal(t, []string{"", "bob", ""}, []string{runs.Items[2].Agent, runs.Items[1].Agent, runs.Items[0].Agent})
	var spoke []string
	for _, ev := range evs {
		if ev.Type == session.EventRunStarted {
			var meta struct{ Agent string }
			if len(ev.Meta) > 0 {
				require.NoError(t, json.Unmarshal(ev.Meta, &meta))
			}
			spoke = append(spoke, meta.Agent)
		}
	}
	assert.Equal(t, []string{"", "bob", ""}, spoke, "RUN_STARTED names another agent than the session's")
	msgs, err := k.Messages(ctx, sess.ID, kernel.PageRequest{})
	require.NoError(t, err)
	var authors []string
	for _, m := range msgs.Items {
		if m.Role == session.RoleAssistant {
			authors = append(authors, m.Agent)
		}
	}
	assert.Equal(t, []string{"alice", "bob", "alice"}, authors)
}
