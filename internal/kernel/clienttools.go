package kernel

import (
	"slices"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// Client-side tools (AG-UI RunAgentInput.tools) are offered to the model
// beside the agent's own for one run. kerneld never runs them: when the
// model calls one, the run runs the agent's calls of that turn and ends
// successfully, the client's calls left without results. The client runs
// them and starts the next run with their results (RunAgentInput's new
// tool messages), which become the tool messages of those calls before
// the model is called again.

// clientToolDefinitions returns the model's view of tools.
func clientToolDefinitions(tools []session.ClientTool) []llm.Tool {
	out := make([]llm.Tool, len(tools))
	for i, t := range tools {
		out[i] = llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	return out
}

// splitClientCalls separates the calls of the client's tools from calls,
// and stops tracking them as pending: the run ends without their results,
// which the client sends with its next run.
func (r *runner) splitClientCalls(calls []session.ToolCall) (agent, client []session.ToolCall) {
	for _, c := range calls {
		if slices.ContainsFunc(r.run.ClientTools, func(t session.ClientTool) bool { return t.Name == c.Name }) {
			client = append(client, c)
			r.answered(c.ID)
			r.clientCalls = append(r.clientCalls, c.ID)
		} else {
			agent = append(agent, c)
		}
	}
	return agent, client
}

// continuedTurn is the number of run's first model call: a run that
// answers client tool calls continues the turn that made them, so its
// first call is the second of that exchange (1), as it would have been
// had kerneld run the tools itself.
func continuedTurn(run *session.Run) int {
	if len(run.ToolResults) > 0 {
		return 1
	}
	return 0
}

// toolResultEvents returns the TOOL_CALL_RESULT events that start a run
// answering client tool calls.
func toolResultEvents(run *session.Run) []session.Event {
	evs := make([]session.Event, len(run.ToolResults))
	for i, t := range run.ToolResults {
		evs[i] = session.ToolCallResult(t.MessageID, t.ToolCallID, t.Content, false)
	}
	return evs
}

// toolResultMessages returns the tool messages of run's tool results.
func toolResultMessages(run *session.Run) []session.Message {
	msgs := make([]session.Message, len(run.ToolResults))
	for i, t := range run.ToolResults {
		msgs[i] = session.Message{ID: t.MessageID, SessionID: run.SessionID, RunID: run.ID, Role: session.RoleTool,
			Content: t.Content, ToolCallID: t.ToolCallID, CreatedAt: run.StartedAt}
	}
	return msgs
}
