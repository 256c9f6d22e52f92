package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

type createSessionRequest struct {
	ID        *string                    `json:"id"`
	Agent     string                     `json:"agent"`
	Name      string                     `json:"name"`
	Title     string                     `json:"title"`
	Metadata  map[string]string          `json:"metadata"`
	ParentID  string                     `json:"parent_id"`
	Memory    map[string]json.RawMessage `json:"memory"`
	TTL       string                     `json:"ttl"`
	Inherit   *inheritBody               `json:"inherit"`
	Overrides *overridesBody             `json:"overrides"`
	// PermissionMode is ask (the default), read_only_auto or auto.
	PermissionMode string        `json:"permission_mode"`
	Webhooks       []webhookBody `json:"webhooks"`
	// MCPServers are MCP servers whose tools the session's runs get.
	MCPServers []mcpServerBody `json:"mcp_servers"`
	// Instructions are added to the agent's system prompt.
	Instructions string `json:"instructions"`
	// Agents may take turns on the session besides its own agent.
	Agents []string `json:"agents"`
}

// webhookBody is a receiver a session names for its events; the kernel
// checks the URL and the events against the server's webhook policy.
type webhookBody struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// toWebhooks returns the webhooks a create request names.
func toWebhooks(ws []webhookBody) []session.Webhook {
	out := make([]session.Webhook, len(ws))
	for i, w := range ws {
		out[i] = session.Webhook{URL: w.URL, Events: w.Events}
	}
	return out
}

// inheritBody says what a child session inherits from its parent.
type inheritBody struct {
	Memory string `json:"memory"`
}

// Validate checks shape only; whether the agent exists is the kernel's call.
func (req createSessionRequest) Validate() error {
	if req.Agent == "" {
		return errdefs.Invalid("agent", "required")
	}
	if req.ID != nil && !session.ValidClientID(*req.ID) {
		return errdefs.Invalid("id", clientIDProblem)
	}
	if _, err := req.ttl(); err != nil {
		return err
	}
	v := checkNoNUL(nil, "agent", req.Agent)
	v = checkNoNUL(v, "name", req.Name)
	v = checkNoNUL(v, "title", req.Title)
	v = checkNoNUL(v, "parent_id", req.ParentID)
	v = checkMetadataNUL(v, "metadata", req.Metadata)
	v = checkMemoryKeys(v, "memory", req.Memory)
	for i, w := range req.Webhooks {
		if w.URL == "" {
			v = v.Add(fmt.Sprintf("webhooks[%d].url", i), "required")
		}
	}
	return req.Overrides.check(v).Err()
}

// ttl parses the requested idle time; "" means the server's default.
func (req createSessionRequest) ttl() (time.Duration, error) {
	if req.TTL == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(req.TTL)
	if err != nil || d <= 0 {
		return 0, errdefs.Invalid("ttl", `must be a positive duration such as "30m" or "24h"`)
	}
	return d, nil
}

type updateSessionRequest struct {
	Name     *string            `json:"name"`
	Title    *string            `json:"title"`
	Metadata map[string]*string `json:"metadata"`
	// Overrides replace the session's; {} clears them.
	Overrides      *overridesBody `json:"overrides"`
	PermissionMode *string        `json:"permission_mode"`
	Instructions   *string        `json:"instructions"`
	Agents         *[]string      `json:"agents"`
	// MCPServers replace the session's own MCP servers ([] removes them);
	// only while it runs nothing.
	MCPServers *[]mcpServerBody `json:"mcp_servers"`
}

// Validate refuses NUL in the name and metadata; bounds are the kernel's.
func (req updateSessionRequest) Validate() error {
	var v *errdefs.ValidationError
	if req.Name != nil {
		v = checkNoNUL(v, "name", *req.Name)
	}
	if req.Title != nil {
		v = checkNoNUL(v, "title", *req.Title)
	}
	v = checkMetadataNUL(v, "metadata", req.Metadata)
	return req.Overrides.check(v).Err()
}

type sessionResponse struct {
	ID          string            `json:"id"`
	Agent       string            `json:"agent"`
	Name        *string           `json:"name"`
	Title       *string           `json:"title"`
	Metadata    map[string]string `json:"metadata"`
	State       session.State     `json:"state"`
	Status      session.Status    `json:"status"`
	ParentID    *string           `json:"parent_id"`
	RootID      string            `json:"root_id"`
	Depth       int               `json:"depth"`
	Tenant      string            `json:"tenant"`
	ActiveRunID *string           `json:"active_run_id"`
	LastSeq     int64             `json:"last_seq"`
	// Unread counts the assistant messages after the caller's read
	// cursor, ReadSeq (PUT /sessions/{id}/read).
	Unread  int   `json:"unread"`
	ReadSeq int64 `json:"read_seq"`
	// QueuedRuns counts the runs waiting to start.
	QueuedRuns   int                        `json:"queued_runs"`
	TTL          *string                    `json:"ttl"`
	ExpiresAt    *time.Time                 `json:"expires_at"`
	Inherit      *inheritBody               `json:"inherit"`
	ForkedFrom   *forkedFromResponse        `json:"forked_from"`
	ClosedReason *string                    `json:"closed_reason"`
	Overrides    overridesBody              `json:"overrides"`
	Agents       []string                   `json:"agents,omitempty"`
	MCPServers   []sessionMCPServerResponse `json:"mcp_servers"`
	// Instructions are the session's own, added to its agent's prompt.
	Instructions *string `json:"instructions"`
	permissionsResponse
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// toSessionResponse shapes s as reader sees it: its unread count and
// read cursor are reader's.
func toSessionResponse(s session.Session, reader string) sessionResponse {
	md := s.Metadata
	if md == nil {
		md = map[string]string{}
	}
	var ttl *string
	if s.TTL > 0 {
		ttl = nullable(s.TTL.String())
	}
	var inherit *inheritBody
	if s.InheritMemory != "" {
		inherit = &inheritBody{Memory: s.InheritMemory}
	}
	out := sessionResponse{
		ID: session.PublicID(s.ID), Agent: s.Agent, Name: nullable(s.Name), Metadata: md, State: s.State, Status: session.StatusOf(&s),
		ParentID: nullable(session.PublicID(s.ParentID)), RootID: session.PublicID(s.RootID), Depth: s.Depth, Tenant: s.Tenant,
		ActiveRunID: nullable(s.ActiveRunID), LastSeq: s.LastSeq, TTL: ttl, ExpiresAt: nullableTime(s.ExpiresAt), Inherit: inherit,
		ClosedReason: nullable(s.ClosedReason), Overrides: toOverridesBody(s.Overrides), permissionsResponse: toPermissionsResponse(s),
		Title: nullable(s.Title), Unread: s.Unread(reader), ReadSeq: s.ReadCursors[reader], Agents: s.Agents, MCPServers: toSessionMCPServers(s.MCPServers),
		Instructions: nullable(s.Instructions),
		CreatedAt:    s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC(),
	}
	if s.ForkedFrom != "" {
		out.ForkedFrom = &forkedFromResponse{SessionID: session.PublicID(s.ForkedFrom), MessagePosition: s.ForkPosition}
	}
	return out
}

// listResponse is one page of a list.
type listResponse[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

func toList[T, R any](p kernel.Page[T], conv func(T) R) listResponse[R] {
	out := listResponse[R]{Data: make([]R, len(p.Items)), NextCursor: nullable(p.Next)}
	for i, item := range p.Items {
		out.Data[i] = conv(item)
	}
	return out
}

// handleSessionCreate handles "POST /sessions".
func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[createSessionRequest](r)
	if err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	ttl, _ := req.ttl() // Validate checked it
	create := kernel.CreateSession{
		Agent: req.Agent, Name: req.Name, Title: req.Title, Metadata: req.Metadata, ParentID: req.ParentID, Memory: req.Memory, TTL: ttl,
		Overrides: req.Overrides.toOverrides(), ID: deref(req.ID), IdempotencyKey: key, Webhooks: toWebhooks(req.Webhooks),
		PermissionMode: req.PermissionMode, Agents: req.Agents, MCPServers: toMCPServers(req.MCPServers),
		Instructions: req.Instructions,
	}
	if req.Inherit != nil {
		create.InheritMemory = req.Inherit.Memory
	}
	sess, created, err := s.kernel.EnsureSession(r.Context(), create)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/sessions/"+session.PublicID(sess.ID))
	if !created {
		// A retry, or a client making sure its session exists: as it is.
		if req.ID == nil {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		return writeJSON(w, http.StatusOK, toSessionResponse(sess, readerFrom(r)))
	}
	return writeJSON(w, http.StatusCreated, toSessionResponse(sess, readerFrom(r)))
}

// idempotencyKey reads the request's Idempotency-Key header; "" if none.
func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if !utf8.ValidString(key) {
		return "", errdefs.Invalid("Idempotency-Key", "is not valid UTF-8")
	}
	return key, nil
}

// handleSessionList handles "GET /sessions".
func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) error {
	page, err := pageRequest(r)
	if err != nil {
		return err
	}
	req, err := sessionFilters(r)
	if err != nil {
		return err
	}
	req.Page = page
	p, err := s.kernel.ListSessions(r.Context(), req)
	if err != nil {
		return err
	}
	return s.writeSessions(w, r, p)
}

// handleSessionGet handles "GET /sessions/{id}".
func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.kernel.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.writeSession(w, r, sess)
}

// handleSessionUpdate handles "PATCH /sessions/{id}".
func (s *Server) handleSessionUpdate(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[updateSessionRequest](r)
	if err != nil {
		return err
	}
	update := kernel.SessionUpdate{
		Name: req.Name, Title: req.Title, Metadata: req.Metadata, Overrides: req.Overrides.toOverrides(),
		PermissionMode: req.PermissionMode, Agents: req.Agents, Instructions: req.Instructions,
	}
	if req.MCPServers != nil {
		servers := toMCPServers(*req.MCPServers)
		if servers == nil {
			servers = []session.MCPServer{}
		}
		update.MCPServers = &servers
	}
	sess, err := s.kernel.UpdateSession(r.Context(), r.PathValue("id"), update)
	if err != nil {
		return err
	}
	return s.writeSession(w, r, sess)
}

// handleSessionDelete handles "DELETE /sessions/{id}".
func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) error {
	cascade, err := boolParam(r, "cascade")
	if err != nil {
		return err
	}
	if err := s.kernel.DeleteSession(r.Context(), r.PathValue("id"), cascade); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pageRequest reads ?limit= and ?cursor=.
func pageRequest(r *http.Request) (kernel.PageRequest, error) {
	q := r.URL.Query()
	p := kernel.PageRequest{Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, errdefs.Invalid("limit", "must be an integer from 1 to 200")
		}
		p.Limit = n // the kernel checks the upper bound
	}
	return p, nil
}

// boolParam reads a boolean query parameter; absent is false.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errdefs.Invalid(name, "must be true or false")
	}
	return b, nil
}

// nullable returns nil for "", so the field encodes as null.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref returns *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
