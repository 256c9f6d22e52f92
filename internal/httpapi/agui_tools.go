package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// toolName is what model APIs accept as a function name.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// readTool reads tools[i], an AG-UI Tool: {name, description, parameters}.
func readTool(i int, raw json.RawMessage) (session.ClientTool, *fieldProblem) {
	at := func(f string) string { return fmt.Sprintf("tools[%d]%s", i, f) }
	var t struct {
		Name        *string         `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := unmarshalPart(raw, &t, looseJSON); err != nil {
		return session.ClientTool{}, &fieldProblem{at(""), "must be an object with name, description and parameters"}
	}
	switch {
	case t.Name == nil || !toolName.MatchString(*t.Name):
		return session.ClientTool{}, &fieldProblem{at(".name"), "must be 1 to 64 characters of [A-Za-z0-9_-]"}
	case t.Description == nil:
		return session.ClientTool{}, &fieldProblem{at(".description"), "required"}
	}
	out := session.ClientTool{Name: *t.Name, Description: *t.Description}
	if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
		var schema map[string]any
		if unmarshalPart(t.Parameters, &schema, looseJSON) != nil {
			return session.ClientTool{}, &fieldProblem{at(".parameters"), "must be a JSON Schema object"}
		}
		out.Parameters = t.Parameters
	}
	return out, nil
}

// duplicateTools adds a problem for every tool named twice.
func duplicateTools(v *errdefs.ValidationError, tools []session.ClientTool) *errdefs.ValidationError {
	seen := map[string]bool{}
	for i, t := range tools {
		if seen[t.Name] {
			v = v.Add(fmt.Sprintf("tools[%d].name", i), fmt.Sprintf("%q is offered twice", t.Name))
		}
		seen[t.Name] = true
	}
	return v
}

// agentToolNames returns the names of the tools agent {name} has.
func (s *Server) agentToolNames(r *http.Request) (map[string]bool, error) {
	spec, err := s.kernel.Agent(r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	tools, _ := s.kernel.AgentTools(r.Context(), spec, false)
	own := make(map[string]bool, len(tools))
	for _, t := range tools {
		own[t.Name] = true
	}
	return own, nil
}

// clientTools checks the tools a client offers a run of agent {name},
// whose own tools are own: the agent must allow client tools (agent file
// `client_tools`), and none may shadow one of the agent's own.
func (s *Server) clientTools(r *http.Request, tools []session.ClientTool, own map[string]bool) ([]session.ClientTool, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	spec, err := s.kernel.Agent(r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	if spec.NoClientTools {
		return nil, errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeClientToolsDisabled,
			"agent %s takes no client-side tools (client_tools: false in its file): send an empty tools list", spec.Name)
	}
	var v *errdefs.ValidationError
	for i, t := range tools {
		if own[t.Name] {
			v = v.Add(fmt.Sprintf("tools[%d].name", i), fmt.Sprintf("%q is a tool of agent %s: a client tool may not shadow it", t.Name, spec.Name))
		}
	}
	return tools, v.Err()
}

// openClientCalls returns the ids of the client tool calls in history
// that have no result yet: calls without a result of tools that are not
// the agent's own (a client tool may not shadow one). The agent's own
// calls without a result belong to a run in progress; the busy policy
// answers for those.
func openClientCalls(history []session.Message, own map[string]bool) map[string]bool {
	open := map[string]bool{}
	for _, m := range history {
		switch m.Role {
		case session.RoleAssistant:
			for _, c := range m.ToolCalls {
				if !own[c.Name] {
					open[c.ID] = true
				}
			}
		case session.RoleTool:
			delete(open, m.ToolCallID)
		}
	}
	return open
}
