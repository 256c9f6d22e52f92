package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// Each method is one route of api/openapi.yaml; a new route is a request
// value and a call to do.

// ListAgents lists the agents (GET /agents).
func (c *Client) ListAgents(ctx context.Context) ([]Agent, error) {
	var out struct {
		Data []Agent `json:"data"`
	}
	err := c.do(ctx, request{method: http.MethodGet, path: "/agents"}, &out)
	return out.Data, err
}

// GetAgent returns an agent (GET /agents/{name}).
func (c *Client) GetAgent(ctx context.Context, name string) (Agent, error) {
	var out Agent
	err := c.do(ctx, request{method: http.MethodGet, path: "/agents/" + segment(name)}, &out)
	return out, err
}

// Usage returns the caller's quotas and usage (GET /usage).
func (c *Client) Usage(ctx context.Context) (TenantUsage, error) {
	var out TenantUsage
	err := c.do(ctx, request{method: http.MethodGet, path: "/usage"}, &out)
	return out, err
}

// CreateSession creates a session (POST /sessions).
func (c *Client) CreateSession(ctx context.Context, req CreateSessionRequest) (Session, error) {
	var out Session
	err := c.do(ctx, request{method: http.MethodPost, path: "/sessions", body: req}, &out)
	return out, err
}

// ListSessions returns one page of the caller's sessions, newest first
// (GET /sessions).
func (c *Client) ListSessions(ctx context.Context, opts ListSessionsOptions) (SessionPage, error) {
	q := opts.values()
	setNonEmpty(q, "agent", opts.Agent)
	setNonEmpty(q, "state", opts.State)
	setNonEmpty(q, "parent_id", opts.ParentID)
	var out SessionPage
	err := c.do(ctx, request{method: http.MethodGet, path: "/sessions", query: q}, &out)
	return out, err
}

// GetSession returns a session (GET /sessions/{id}).
func (c *Client) GetSession(ctx context.Context, id string) (Session, error) {
	var out Session
	err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(id)}, &out)
	return out, err
}

// UpdateSession renames a session or patches its metadata
// (PATCH /sessions/{id}).
func (c *Client) UpdateSession(ctx context.Context, id string, req UpdateSessionRequest) (Session, error) {
	var out Session
	err := c.do(ctx, request{method: http.MethodPatch, path: sessionPath(id), body: req}, &out)
	return out, err
}

// DeleteSession deletes a session with its history (DELETE /sessions/{id});
// with cascade its child sessions too.
func (c *Client) DeleteSession(ctx context.Context, id string, cascade bool) error {
	var q url.Values
	if cascade {
		q = url.Values{"cascade": {"true"}}
	}
	return c.do(ctx, request{method: http.MethodDelete, path: sessionPath(id), query: q}, nil)
}

// MarkRead records that the caller has read a session up to the event
// with seq, or with seq <= 0 everything logged so far, and returns the
// session with the caller's Unread count (PUT /sessions/{id}/read). A
// read cursor never moves back: an older seq changes nothing.
func (c *Client) MarkRead(ctx context.Context, id string, seq int64) (Session, error) {
	var body any
	if seq > 0 {
		body = struct {
			Seq int64 `json:"seq"`
		}{seq}
	}
	var out Session
	err := c.do(ctx, request{method: http.MethodPut, path: sessionPath(id) + "/read", body: body}, &out)
	return out, err
}

// GetState returns a session's app state, the state AG-UI clients see as
// STATE_SNAPSHOT; JSON null before any (GET /sessions/{id}/state).
func (c *Client) GetState(ctx context.Context, id string) (json.RawMessage, error) {
	var out struct {
		State json.RawMessage `json:"state"`
	}
	err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(id) + "/state"}, &out)
	return out.State, err
}

// PutState replaces a session's app state with state, marshalled as JSON;
// the session's next run starts with a STATE_SNAPSHOT of it
// (PUT /sessions/{id}/state).
func (c *Client) PutState(ctx context.Context, id string, state any) (json.RawMessage, error) {
	body := struct {
		State any `json:"state"`
	}{state}
	var out struct {
		State json.RawMessage `json:"state"`
	}
	err := c.do(ctx, request{method: http.MethodPut, path: sessionPath(id) + "/state", body: body}, &out)
	return out.State, err
}

// CloseSession closes a session and its children: no new runs; the
// history stays readable until deleted (POST /sessions/{id}/close).
func (c *Client) CloseSession(ctx context.Context, id, reason string) (Session, error) {
	body := struct {
		Reason string `json:"reason,omitempty"`
	}{reason}
	var out Session
	err := c.do(ctx, request{method: http.MethodPost, path: sessionPath(id) + "/close", body: body}, &out)
	return out, err
}

// ForkSession copies a session into a new one (POST /sessions/{id}/fork):
// its whole history, or with atMessage > 0 the messages up to that
// position.
func (c *Client) ForkSession(ctx context.Context, id string, atMessage int64) (Session, error) {
	body := struct {
		AtMessage int64 `json:"at_message,omitempty"`
	}{atMessage}
	var out Session
	err := c.do(ctx, request{method: http.MethodPost, path: sessionPath(id) + "/fork", body: body}, &out)
	return out, err
}

// CompactSession summarises a session's older history now and returns
// once the summarising run has ended (POST /sessions/{id}/compact).
func (c *Client) CompactSession(ctx context.Context, id string) (Compaction, error) {
	var out Compaction
	err := c.do(ctx, request{method: http.MethodPost, path: sessionPath(id) + "/compact"}, &out)
	return out, err
}

// ClearSession empties a session's history in place and returns once the
// clearing run has ended (POST /sessions/{id}/clear): the session keeps its
// id, settings and, unless memory is true, its memory. A session with a
// run active or queued is refused with session_busy.
func (c *Client) ClearSession(ctx context.Context, id string, memory bool) (Clear, error) {
	body := struct {
		Memory bool `json:"memory,omitempty"`
	}{memory}
	var out Clear
	err := c.do(ctx, request{method: http.MethodPost, path: sessionPath(id) + "/clear", body: body}, &out)
	return out, err
}

// ListChildren returns one page of a session's child sessions
// (GET /sessions/{id}/children).
func (c *Client) ListChildren(ctx context.Context, id string, page Page) (SessionPage, error) {
	var out SessionPage
	err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(id) + "/children", query: page.values()}, &out)
	return out, err
}

// CreateRun posts input to a session and returns the run at once
// (POST /sessions/{id}/run, 202); follow it with Follow, or use StreamRun.
func (c *Client) CreateRun(ctx context.Context, id string, req CreateRunRequest) (Run, error) {
	var out Run
	err := c.do(ctx, runRequest(id, req), &out)
	return out, err
}

// RunAgent runs input with an agent in one call (POST /run): in the
// session req.SessionID, created if it does not exist.
func (c *Client) RunAgent(ctx context.Context, req AgentRunRequest) (Run, error) {
	var out Run
	err := c.do(ctx, request{method: http.MethodPost, path: "/run", body: req}, &out)
	return out, err
}

// RegenerateRun answers a run's input again in a fork of the session made
// just before it (POST /sessions/{id}/runs/{run_id}/regenerate).
func (c *Client) RegenerateRun(ctx context.Context, id, runID string) (Regeneration, error) {
	var out Regeneration
	err := c.do(ctx, request{method: http.MethodPost, path: runPath(id, runID) + "/regenerate"}, &out)
	return out, err
}

// GetRun returns a run (GET /sessions/{id}/runs/{run_id}).
func (c *Client) GetRun(ctx context.Context, id, runID string) (Run, error) {
	var out Run
	err := c.do(ctx, request{method: http.MethodGet, path: runPath(id, runID)}, &out)
	return out, err
}

// ListRuns returns one page of a session's runs, newest first
// (GET /sessions/{id}/runs).
func (c *Client) ListRuns(ctx context.Context, id string, page Page) (RunPage, error) {
	var out RunPage
	err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(id) + "/runs", query: page.values()}, &out)
	return out, err
}

// CancelRun stops a run and returns it once it has recorded its end
// (POST /sessions/{id}/runs/{run_id}/cancel).
func (c *Client) CancelRun(ctx context.Context, id, runID string) (Run, error) {
	var out Run
	err := c.do(ctx, request{method: http.MethodPost, path: runPath(id, runID) + "/cancel"}, &out)
	return out, err
}

// ListApprovals lists the tool calls of a run that needed a decision
// (GET /sessions/{id}/runs/{run_id}/approvals).
func (c *Client) ListApprovals(ctx context.Context, id, runID string) ([]Approval, error) {
	var out struct {
		Data []Approval `json:"data"`
	}
	err := c.do(ctx, request{method: http.MethodGet, path: runPath(id, runID) + "/approvals"}, &out)
	return out.Data, err
}

// DecideApproval approves or denies a tool call the run waits on
// (POST /sessions/{id}/runs/{run_id}/approvals/{tool_call_id}).
func (c *Client) DecideApproval(ctx context.Context, id, runID, toolCallID string, d Decision) (Approval, error) {
	var out Approval
	path := runPath(id, runID) + "/approvals/" + segment(toolCallID)
	err := c.do(ctx, request{method: http.MethodPost, path: path, body: d}, &out)
	return out, err
}

// Inbox returns one page of the approvals waiting across the caller's
// sessions, oldest first, optionally of one agent's (GET /approvals).
// Decide each with DecideApproval(item.SessionID, item.RunID,
// item.ToolCallID, ...).
func (c *Client) Inbox(ctx context.Context, agent string, page Page) (InboxPage, error) {
	q := page.values()
	setNonEmpty(q, "agent", agent)
	var out InboxPage
	err := c.do(ctx, request{method: http.MethodGet, path: "/approvals", query: q}, &out)
	return out, err
}

// ListMessages returns one page of a session's conversation history,
// oldest first (GET /sessions/{id}/messages).
func (c *Client) ListMessages(ctx context.Context, id string, page Page) (MessagePage, error) {
	var out MessagePage
	err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(id) + "/messages", query: page.values()}, &out)
	return out, err
}

// Transcript returns a session's history as the Vercel AI SDK's
// UIMessage list, what useChat takes as its messages
// (GET /sessions/{id}/transcript).
func (c *Client) Transcript(ctx context.Context, id string) ([]UIMessage, error) {
	var out []UIMessage
	err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(id) + "/transcript"}, &out)
	return out, err
}

// ListMemory returns every memory entry of a session, by key
// (GET /sessions/{id}/memory).
func (c *Client) ListMemory(ctx context.Context, id string) ([]MemoryEntry, error) {
	var out struct {
		Data []MemoryEntry `json:"data"`
	}
	err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(id) + "/memory"}, &out)
	return out.Data, err
}

// GetMemory returns one memory entry (GET /sessions/{id}/memory/{key}).
func (c *Client) GetMemory(ctx context.Context, id, key string) (MemoryEntry, error) {
	var out MemoryEntry
	err := c.do(ctx, request{method: http.MethodGet, path: memoryPath(id, key)}, &out)
	return out, err
}

// PutMemory stores value, marshalled as JSON, under key
// (PUT /sessions/{id}/memory/{key}). A json.RawMessage is sent as is.
func (c *Client) PutMemory(ctx context.Context, id, key string, value any) (MemoryEntry, error) {
	raw, ok := value.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(value)
		if err != nil {
			return MemoryEntry{}, err
		}
		raw = b
	}
	body := struct {
		Value json.RawMessage `json:"value"`
	}{raw}
	var out MemoryEntry
	err := c.do(ctx, request{method: http.MethodPut, path: memoryPath(id, key), body: body}, &out)
	return out, err
}

// DeleteMemory removes a memory entry (DELETE /sessions/{id}/memory/{key}).
func (c *Client) DeleteMemory(ctx context.Context, id, key string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: memoryPath(id, key)}, nil)
}

// Events returns one JSON page of a session's event log, for clients that
// poll (GET /sessions/{id}/events with Accept: application/json).
func (c *Client) Events(ctx context.Context, id string, opts EventPageOptions) (EventPage, error) {
	q := url.Values{}
	if opts.After > 0 {
		q.Set("after", strconv.FormatInt(opts.After, 10))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var out struct {
		Data      []json.RawMessage `json:"data"`
		NextAfter int64             `json:"next_after"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(id) + "/events", query: q}, &out); err != nil {
		return EventPage{}, err
	}
	page := EventPage{Events: make([]Event, 0, len(out.Data)), NextAfter: out.NextAfter}
	for _, raw := range out.Data {
		ev, err := ParseEvent(raw, 0)
		if err != nil {
			return EventPage{}, err
		}
		page.Events = append(page.Events, ev)
	}
	return page, nil
}

// runRequest is the request of POST /sessions/{id}/run.
func runRequest(id string, req CreateRunRequest) request {
	r := request{method: http.MethodPost, path: sessionPath(id) + "/run", body: req, header: http.Header{}}
	if req.IdempotencyKey != "" {
		r.header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	return r
}

func sessionPath(id string) string    { return "/sessions/" + segment(id) }
func runPath(id, runID string) string { return sessionPath(id) + "/runs/" + segment(runID) }
func memoryPath(id, key string) string {
	return sessionPath(id) + "/memory/" + (&url.URL{Path: key}).EscapedPath()
}
func setNonEmpty(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

// values is the page as query parameters.
func (p Page) values() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	setNonEmpty(q, "cursor", p.Cursor)
	return q
}
