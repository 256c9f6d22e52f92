package session

import (
	"maps"
	"slices"
)

// MCPServer is an MCP server a client attached to one session: its tools
// are offered to the session's runs beside the agent's own. It is an HTTP
// (streamable) endpoint, whose header values may name the tenant's
// secrets as ${NAME} (the session keeps the reference, never the secret),
// or a stdio server the operator allows by name; never a command of the
// client's.
type MCPServer struct {
	Name    string            `json:"name"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Stdio   string            `json:"stdio,omitempty"`
	// RequireApproval makes every call of the server's tools wait for a
	// person's decision (or the session's permission mode).
	RequireApproval bool `json:"require_approval,omitempty"`
}

// CloneMCPServers returns servers sharing no memory with the original.
func CloneMCPServers(servers []MCPServer) []MCPServer {
	out := slices.Clone(servers)
	for i := range out {
		out[i].Headers = maps.Clone(out[i].Headers)
	}
	return out
}
