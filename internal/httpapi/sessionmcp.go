package httpapi

import (
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// mcpServerBody is an MCP server a client attaches to a session: an HTTP
// (streamable) endpoint by url, whose header values may name the tenant's
// secrets as ${NAME}, or a stdio server the operator allows, by its name
// in the configuration. The kernel checks them.
type mcpServerBody struct {
	Name            string            `json:"name"`
	URL             string            `json:"url"`
	Headers         map[string]string `json:"headers"`
	Stdio           string            `json:"stdio"`
	RequireApproval bool              `json:"require_approval"`
}

func toMCPServers(bodies []mcpServerBody) []session.MCPServer {
	if bodies == nil {
		return nil
	}
	out := make([]session.MCPServer, len(bodies))
	for i, b := range bodies {
		out[i] = session.MCPServer{Name: b.Name, URL: b.URL, Headers: b.Headers, Stdio: b.Stdio, RequireApproval: b.RequireApproval}
	}
	return out
}

// sessionMCPServerResponse is one of a session's own MCP servers: what
// the client attached (header values as the client gave them: secrets
// by reference only) and, on GET /sessions/{id}, how it is doing on the
// replica that answers.
type sessionMCPServerResponse struct {
	Name            string            `json:"name"`
	Transport       string            `json:"transport"`
	URL             *string           `json:"url"`
	Stdio           *string           `json:"stdio"`
	Headers         map[string]string `json:"headers"`
	RequireApproval bool              `json:"require_approval"`
	State           *string           `json:"state"`
	Error           *string           `json:"error"`
}

func toSessionMCPServers(servers []session.MCPServer) []sessionMCPServerResponse {
	out := make([]sessionMCPServerResponse, len(servers))
	for i, srv := range servers {
		out[i] = sessionMCPServerResponse{Name: srv.Name, Transport: "http", URL: nullable(srv.URL), Stdio: nullable(srv.Stdio),
			Headers: srv.Headers, RequireApproval: srv.RequireApproval}
		if srv.Stdio != "" {
			out[i].Transport = "stdio"
		}
		if out[i].Headers == nil {
			out[i].Headers = map[string]string{}
		}
	}
	return out
}

// withMCPStatus adds to out the states of its session's MCP servers.
func withMCPStatus(out []sessionMCPServerResponse, status []kernel.MCPServerStatus) {
	for i := range out {
		if i >= len(status) {
			return
		}
		out[i].State = nullable(status[i].State)
		if status[i].Err != nil {
			out[i].Error = nullable(status[i].Err.Error())
		}
	}
}
