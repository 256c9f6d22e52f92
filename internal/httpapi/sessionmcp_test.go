package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/tools/mcp"
)

// TestSession_MCPServers: mcp_servers at creation are kept by reference
// and shown with their state; a stdio server the operator does not allow
// is refused naming the field, as is a secret the tenant lacks; PATCH
// replaces them.
func TestSession_MCPServers(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{SessionMCP: kernel.SessionMCP{
		Stdio:  map[string]mcp.ServerConfig{"everything": {Command: "npx"}},
		Secret: func(tenant, name string) (string, bool) { return "s3cret", tenant == "default" && name == "DOCS_TOKEN" },
	}}})
	sess := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","mcp_servers":[
		{"name":"docs","url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer ${DOCS_TOKEN}"}},
		{"name":"everything","stdio":"everything","require_approval":true}]}`)
	id := sess["id"].(string)
	got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	assert.JSONEq(t, `[
		{"name":"docs","transport":"http","url":"https://mcp.example.com/mcp","stdio":null,
		 "headers":{"Authorization":"Bearer ${DOCS_TOKEN}"},"require_approval":false,"state":"stopped","error":null},
		{"name":"everything","transport":"stdio","url":null,"stdio":"everything","headers":{},
		 "require_approval":true,"state":"stopped","error":null}]`, string(mustJSON(t, got["mcp_servers"])),
		"secrets by reference only; nothing started before a run needs it")

	p := wantProblem(t, ts.do(t, "POST", "/sessions", `{"agent":"echo","mcp_servers":[{"name":"sh","stdio":"bash"}]}`),
		http.StatusBadRequest, "invalid_request")
	assert.Contains(t, p["errors"].(map[string]any)["mcp_servers[0].stdio"], `"bash" is not a stdio server this kerneld allows`)
	p = wantProblem(t, ts.do(t, "POST", "/sessions", `{"agent":"echo","mcp_servers":[{"name":"d","url":"https://x.example/mcp","headers":{"X":"${NOPE}"}}]}`),
		http.StatusBadRequest, "invalid_request")
	assert.Contains(t, p["errors"].(map[string]any)["mcp_servers[0].headers.X"], `names secret "NOPE"`)

	patched := ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"mcp_servers":[]}`)
	assert.Equal(t, []any{}, patched["mcp_servers"])
	plain := ts.must(t, http.StatusOK, "GET", "/sessions/"+ts.createSession(t, "echo"), "")
	require.Contains(t, plain, "mcp_servers")
	assert.Equal(t, []any{}, plain["mcp_servers"])
}
