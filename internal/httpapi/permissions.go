package httpapi

import (
	"encoding/json"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/session"
)

// permissionsResponse is how a session's calls that need approval get it:
// its mode and the standing approvals given with the decision "always".
type permissionsResponse struct {
	PermissionMode string          `json:"permission_mode"`
	AlwaysApproved []grantResponse `json:"always_approved"`
}

// grantResponse is one standing approval: calls of the tool, with these
// arguments when they are not null, run without asking.
type grantResponse struct {
	ToolName   string          `json:"tool_name"`
	Arguments  json.RawMessage `json:"arguments"`
	ToolCallID string          `json:"tool_call_id"`
}

func toPermissionsResponse(s session.Session) permissionsResponse {
	out := permissionsResponse{PermissionMode: s.PermissionMode, AlwaysApproved: make([]grantResponse, len(s.Grants))}
	if out.PermissionMode == "" {
		out.PermissionMode = agents.PermissionAsk
	}
	for i, g := range s.Grants {
		args := json.RawMessage("null")
		if strings.HasPrefix(g.Arguments, "{") && json.Valid([]byte(g.Arguments)) { // arguments are an object
			args = json.RawMessage(g.Arguments)
		}
		out.AlwaysApproved[i] = grantResponse{ToolName: g.Tool, Arguments: args, ToolCallID: g.ToolCallID}
	}
	return out
}
