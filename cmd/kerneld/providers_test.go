package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRun_ModelAgentsWithoutKeys starts kerneld on the repository's agents
// with an empty environment, as on a fresh machine: the agents on real
// models are listed as unavailable, naming the variable to set, and
// refuse sessions with 422 agent_unavailable, while kerneld runs.
func TestRun_ModelAgentsWithoutKeys(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	args := []string{"-addr", "127.0.0.1:0", "-agents-dir", "../../configs/agents", "-config", "../../configs/kerneld.yaml",
		"-data-dir", t.TempDir()}
	go func() { done <- run(ctx, args, env(nil), io.Discard, logs) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return")
		}
	}()
	base := "http://" + waitAddr(t, logs.String)
	waitReady(t, base)

	var list struct {
		Data []struct {
			Name              string  `json:"name"`
			Available         bool    `json:"available"`
			UnavailableReason *string `json:"unavailable_reason"`
		} `json:"data"`
	}
	getJSON(t, base+"/agents", &list)
	reasons := map[string]*string{}
	for _, a := range list.Data {
		if !a.Available {
			reasons[a.Name] = a.UnavailableReason
		}
	}
	for agent, envVar := range map[string]string{"assistant": "OPENAI_API_KEY", "claude": "ANTHROPIC_API_KEY"} {
		reason := reasons[agent]
		if reason == nil || !strings.Contains(*reason, envVar) {
			t.Errorf("GET /agents: %s unavailable_reason = %v, want it listed unavailable naming %s", agent, reason, envVar)
		}
	}
	if _, ok := reasons["echo"]; ok {
		t.Error("GET /agents: echo is unavailable, want it available")
	}

	res, err := http.Post(base+"/sessions", "application/json", strings.NewReader(`{"agent":"assistant"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var problem struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	if err := json.NewDecoder(res.Body).Decode(&problem); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusUnprocessableEntity || res.Header.Get("Content-Type") != "application/problem+json" ||
		problem.Code != "agent_unavailable" || !strings.Contains(problem.Detail, "OPENAI_API_KEY") {
		t.Errorf("POST /sessions assistant = %d %s %+v, want 422 problem+json agent_unavailable naming OPENAI_API_KEY",
			res.StatusCode, res.Header.Get("Content-Type"), problem)
	}
}
