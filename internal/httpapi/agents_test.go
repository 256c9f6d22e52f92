package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// keyed is an agent whose model block carries secrets that must never be
// served.
const keyed = `
name: keyed
description: has an API key
model:
  provider: scripted
  name: model-x
  api_key: sk-test-0123456789-SECRET
  base_url: https://user:hunter2@models.example/v1
  script: [{text: "ok"}]
tools: [current_time, {name: memory_set, require_approval: true}]
max_turns: 4
limits: {max_children: 3, max_depth: 2, run_timeout: 90s}
memory: {max_history_messages: 50}
`

func TestAgents_List(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: append(slices.Clone(kerneltest.DefaultAgents), keyed)}})
	res := ts.do(t, "GET", "/agents", "")
	if res.status != http.StatusOK {
		t.Fatalf("GET /agents = %d %s, want 200", res.status, res.body)
	}
	for _, secret := range []string{"sk-test-0123456789-SECRET", "hunter2", "api_key", "apiKey", "base_url", "models.example"} {
		if strings.Contains(string(res.body), secret) {
			t.Errorf("GET /agents body contains %q", secret)
		}
	}
	var list struct {
		Data []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Model       struct {
				Provider string `json:"provider"`
				Name     string `json:"name"`
			} `json:"model"`
			Tools []struct {
				Name            string          `json:"name"`
				Description     string          `json:"description"`
				Parameters      json.RawMessage `json:"parameters"`
				RequireApproval bool            `json:"require_approval"`
			} `json:"tools"`
			MaxTurns int `json:"max_turns"`
			Limits   struct {
				MaxChildren       int `json:"max_children"`
				MaxDepth          int `json:"max_depth"`
				RunTimeoutSeconds int `json:"run_timeout_seconds"`
			} `json:"limits"`
			MaxHistoryMessages int `json:"max_history_messages"`
		} `json:"data"`
	}
	if err := json.Unmarshal(res.body, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range list.Data {
		names = append(names, a.Name)
		if a.Description == "" || a.Model.Provider != "scripted" {
			t.Errorf("agent %s: description %q provider %q, want both set", a.Name, a.Description, a.Model.Provider)
		}
		if a.Tools == nil {
			t.Errorf("agent %s: tools = null, want an array", a.Name)
		}
		for _, tool := range a.Tools {
			var schema map[string]any
			if err := json.Unmarshal(tool.Parameters, &schema); err != nil || schema["type"] != "object" {
				t.Errorf("agent %s tool %s: parameters = %s, want a JSON Schema object", a.Name, tool.Name, tool.Parameters)
			}
			if tool.Description == "" {
				t.Errorf("agent %s tool %s: no description", a.Name, tool.Name)
			}
		}
	}
	want := []string{"clumsy", "delegator", "echo", "failing", "frontend", "gated", "keyed", "looper", "parent", "slow", "tooluser", "waiter"}
	if !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v (sorted)", names, want)
	}

	i := slices.Index(names, "keyed")
	k := list.Data[i]
	if k.Model.Name != "model-x" || k.MaxTurns != 4 || k.MaxHistoryMessages != 50 ||
		k.Limits.MaxChildren != 3 || k.Limits.MaxDepth != 2 || k.Limits.RunTimeoutSeconds != 90 {
		t.Errorf("keyed = %+v, want model-x, max_turns 4, history 50, limits 3/2/90s", k)
	}
	if len(k.Tools) != 2 || k.Tools[0].Name != "current_time" || k.Tools[0].RequireApproval ||
		k.Tools[1].Name != "memory_set" || !k.Tools[1].RequireApproval {
		t.Errorf("keyed tools = %+v, want current_time, memory_set (approval required)", k.Tools)
	}
	var timeSchema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(k.Tools[0].Parameters, &timeSchema); err != nil || timeSchema.Properties["timezone"] == nil {
		t.Errorf("current_time parameters = %s, want a timezone property", k.Tools[0].Parameters)
	}

	echo := list.Data[slices.Index(names, "echo")]
	var tools []string
	for _, tool := range echo.Tools {
		tools = append(tools, tool.Name)
	}
	if fmt.Sprint(tools) != "[current_time memory_get memory_set]" || echo.MaxTurns != 16 {
		t.Errorf("echo tools %v max_turns %d, want [current_time memory_get memory_set] and 16", tools, echo.MaxTurns)
	}
	if failing := list.Data[slices.Index(names, "failing")]; len(failing.Tools) != 0 {
		t.Errorf("failing tools = %v, want []", failing.Tools)
	}
}

func TestAgents_Get(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: append(slices.Clone(kerneltest.DefaultAgents), keyed)}})
	list := ts.do(t, "GET", "/agents", "")
	var all struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(list.body, &all); err != nil {
		t.Fatal(err)
	}
	for _, raw := range all.Data {
		var a struct{ Name string }
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		res := ts.do(t, "GET", "/agents/"+a.Name, "")
		if res.status != http.StatusOK {
			t.Fatalf("GET /agents/%s = %d %s, want 200", a.Name, res.status, res.body)
		}
		if got, want := compactJSON(t, res.body), compactJSON(t, raw); got != want {
			t.Errorf("GET /agents/%s = %s, want the list's entry %s", a.Name, got, want)
		}
		if strings.Contains(string(res.body), "SECRET") {
			t.Errorf("GET /agents/%s leaks the API key", a.Name)
		}
	}
	runErrorCases(t, ts, []errorCase{
		{name: "ErrNotFound", method: "GET", path: "/agents/nope", status: 404, code: "agent_not_found"},
		{name: "ErrCase", method: "GET", path: "/agents/ECHO", status: 404, code: "agent_not_found"},
		{name: "ErrEncoded", method: "GET", path: "/agents/ec%20ho", status: 404, code: "agent_not_found"},
	})
}
