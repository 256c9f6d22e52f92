package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// agentView is the part of an agent body the MCP tests read.
type agentView struct {
	Tools []struct {
		Name            string          `json:"name"`
		Parameters      json.RawMessage `json:"parameters"`
		RequireApproval bool            `json:"require_approval"`
		MCPServer       *string         `json:"mcp_server"`
	} `json:"tools"`
	MCPServers []struct {
		Name      string  `json:"name"`
		Transport string  `json:"transport"`
		State     string  `json:"state"`
		Error     *string `json:"error"`
	} `json:"mcp_servers"`
}

func (ts *testServer) agentView(t *testing.T, path string) agentView {
	t.Helper()
	res := ts.do(t, "GET", path, "")
	if res.status != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, res.status, res.body)
	}
	body := res.body
	if path == "/agents" { // the one agent in the list
		var list struct{ Data []json.RawMessage }
		if err := json.Unmarshal(res.body, &list); err != nil || len(list.Data) != 1 {
			t.Fatalf("GET /agents = %s", res.body)
		}
		body = list.Data[0]
	}
	var v agentView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// toolSummary lists tools as "name(server, approval, schema?)".
func (v agentView) toolSummary() []string {
	var out []string
	for _, tool := range v.Tools {
		server := "-"
		if tool.MCPServer != nil {
			server = *tool.MCPServer
		}
		out = append(out, fmt.Sprintf("%s(%s,%t,%t)", tool.Name, server, tool.RequireApproval, string(tool.Parameters) != "null"))
	}
	return out
}

// TestAgents_MCPServers: listing starts no server; getting the agent
// starts them, lists their tools and reports the one that cannot start.
func TestAgents_MCPServers(t *testing.T) {
	srv := mcptest.ServeHTTP(t)
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: []string{`
name: mcp
description: uses MCP servers
model: {provider: scripted, script: [{text: "ok"}]}
tools: [current_time, {name: t__echo, require_approval: true}]
mcp_servers:
  - {name: t, url: "` + srv.URL + `", allow: [echo, fail]}
  - {name: broken, command: /nonexistent/mcp-server}
`}}})

	before := ts.agentView(t, "/agents")
	if got, want := fmt.Sprint(before.toolSummary()), "[current_time(-,false,true) t__echo(t,true,false)]"; got != want {
		t.Errorf("listed tools before any start = %s, want %s", got, want)
	}
	for _, s := range before.MCPServers {
		if s.State != "stopped" || s.Error != nil {
			t.Errorf("server %s before any start = %s %v, want stopped", s.Name, s.State, s.Error)
		}
	}

	got := ts.agentView(t, "/agents/mcp")
	if got, want := fmt.Sprint(got.toolSummary()), "[current_time(-,false,true) t__echo(t,true,true) t__fail(t,false,true)]"; got != want {
		t.Errorf("GET /agents/mcp tools = %s, want %s", got, want)
	}
	if !strings.Contains(string(got.Tools[1].Parameters), `"message"`) {
		t.Errorf("t__echo parameters = %s, want its input schema", got.Tools[1].Parameters)
	}
	if len(got.MCPServers) != 2 {
		t.Fatalf("mcp_servers = %+v", got.MCPServers)
	}
	if s := got.MCPServers[0]; s.Name != "t" || s.Transport != "http" || s.State != "running" || s.Error != nil {
		t.Errorf("server t = %+v, want running over http", s)
	}
	if s := got.MCPServers[1]; s.Name != "broken" || s.Transport != "stdio" || s.State != "failed" ||
		s.Error == nil || !strings.Contains(*s.Error, "/nonexistent/mcp-server") {
		t.Errorf("server broken = %+v, want failed with an error naming its command", s)
	}

	after := ts.agentView(t, "/agents")
	if got, want := fmt.Sprint(after.toolSummary()), "[current_time(-,false,true) t__echo(t,true,true) t__fail(t,false,true)]"; got != want {
		t.Errorf("listed tools once started = %s, want %s", got, want)
	}
}

// TestMCP_EverythingWithApproval is the whole path over HTTP: an agent
// whose everything__echo requires approval waits for POST …/approvals/…,
// then the reference server runs it and its result streams back.
func TestMCP_EverythingWithApproval(t *testing.T) {
	command, args := mcptest.Everything(t)
	argsJSON, _ := json.Marshal(args)
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: []string{`
name: mcp
description: asks the reference server to echo
model:
  provider: scripted
  script:
    - {text: "Asking.", tool_calls: [{name: everything__echo, arguments: {message: "{input}"}}]}
    - {text: "Done."}
tools: [{name: everything__echo, require_approval: true}]
mcp_servers:
  - {name: everything, command: "` + command + `", args: ` + string(argsJSON) + `, allow: [echo]}
`}}})
	id := ts.createSession(t, "mcp")
	s := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"hello MCP"}`)
	asked := s.events(t, func(f frame) bool { return strings.Contains(f.data, "kerneld.approval.requested") })
	var requested struct {
		Value struct {
			ToolCallID string `json:"toolCallId"`
			ToolName   string `json:"toolName"`
		} `json:"value"`
	}
	if err := json.Unmarshal([]byte(asked[len(asked)-1].data), &requested); err != nil {
		t.Fatal(err)
	}
	if requested.Value.ToolName != "everything__echo" {
		t.Fatalf("approval requested for %+v", requested)
	}
	var started struct{ RunID string }
	if err := json.Unmarshal([]byte(asked[0].data), &started); err != nil || asked[0].event != "RUN_STARTED" {
		t.Fatalf("first frame = %+v", asked[0])
	}
	ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+started.RunID+"/approvals/"+requested.Value.ToolCallID, `{"decision":"approve"}`)

	var result string
	for _, f := range s.events(t, runEnded) {
		if f.event == "TOOL_CALL_RESULT" {
			var ev struct{ Content string }
			if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
				t.Fatal(err)
			}
			result = ev.Content
		}
		if f.event == "RUN_ERROR" {
			t.Fatalf("run failed: %s", f.data)
		}
	}
	if result != "Echo: hello MCP" {
		t.Errorf("TOOL_CALL_RESULT content = %q, want the reference server's echo", result)
	}
}
