package kernel

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// CreateSession is a request to create a session.
type CreateSession struct {
	Agent string
	Name  string
	Title string // kerneld titles a session without one after its first run
	// Instructions are added to the agent's system prompt (see
	// MaxInstructionsBytes).
	Instructions string
	Metadata     map[string]string
	ParentID     string
	Memory       map[string]json.RawMessage // initial memory entries
	TTL          time.Duration              // idle time before retention closes it; 0: the default
	// InheritMemory is InheritNone (the default) or InheritCopy: a child
	// then starts with a copy of its parent's memory.
	InheritMemory string
	// Overrides are model settings for the session's runs, within what the
	// agent allows.
	Overrides *session.Overrides
	// PermissionMode is how the session's calls that need approval get
	// it, within the agent's permission_modes; "" asks.
	PermissionMode string
	// Webhooks receive the session's events (see internal/webhook).
	Webhooks []session.Webhook
	// MCPServers are MCP servers whose tools the session's runs get
	// beside the agent's (sessionmcp.go).
	MCPServers []session.MCPServer
	// Agents are other agents that may take turns on the session's
	// conversation (see peers.go).
	Agents []string
	// ID is an id the client chose, unique within its tenant, and
	// IdempotencyKey the key of a creation the client may retry; see
	// EnsureSession, which alone uses them.
	ID             string
	IdempotencyKey string
	key            string // the store key EnsureSession chose
	spawnKey       string // the spawn_agent call that creates this child (session.SessionExt.SpawnKey)
	// spawner is the agent whose run creates this child, which is not the
	// parent session's own when another agent took the turn: its
	// max_children and max_depth bound the child. "" is the parent's.
	spawner string
}

// SessionUpdate changes a session's name and metadata. Nil fields are left
// alone; a metadata entry with a nil value is removed.
type SessionUpdate struct {
	Name  *string
	Title *string // "" clears it; kerneld then leaves it empty
	// Instructions, when not nil, replace the session's; "" clears them.
	Instructions *string
	Metadata     map[string]*string
	// Overrides, when not nil, replace the session's overrides; empty ones
	// clear them.
	Overrides *session.Overrides
	// PermissionMode, when not nil, replaces the session's mode.
	PermissionMode *string
	// MCPServers, when not nil, replace the session's own MCP servers
	// (empty: none); only while no run is under way.
	MCPServers *[]session.MCPServer
	// Agents, when not nil, replace the other agents that may take turns
	// on the session; empty clears them.
	Agents *[]string
}

// ListSessions is a request to list sessions. Empty filters match all.
type ListSessions struct {
	Agent      string
	State      session.State
	ParentID   string
	ForkedFrom string // forks of this session
	// Metadata selects sessions holding every one of these entries.
	Metadata map[string]string
	// CreatedAfter and CreatedBefore, when set, bound the creation time
	// (exclusive).
	CreatedAfter, CreatedBefore time.Time
	// Search selects sessions whose title or name contains it.
	Search string
	Page   PageRequest
}

// CreateSession creates a session for an agent, as a child of ParentID
// when set, within the parent agent's depth and children limits.
func (k *Kernel) CreateSession(ctx context.Context, req CreateSession) (session.Session, error) {
	spec, err := k.runnableAgent(req.Agent)
	if err != nil {
		return session.Session{}, err
	}
	if err := checkOverrides(spec, req.Overrides); err != nil {
		return session.Session{}, err
	}
	if err := checkPermissionMode(spec, req.PermissionMode); err != nil {
		return session.Session{}, err
	}
	if err := k.checkSessionAgents(req.Agent, req.Agents); err != nil {
		return session.Session{}, err
	}
	if err := k.validateSessionFields(req.Name, req.Metadata); err != nil {
		return session.Session{}, err
	}
	if err := k.validateTitle(req.Title); err != nil {
		return session.Session{}, err
	}
	if err := validateInstructions(req.Instructions); err != nil {
		return session.Session{}, err
	}
	if req.TTL < 0 {
		return session.Session{}, errdefs.Invalid("ttl", "must not be negative")
	}
	entries, err := k.memoryEntries(req.Memory)
	if err != nil {
		return session.Session{}, err
	}
	if err := checkInherit(req); err != nil {
		return session.Session{}, err
	}
	if err := k.sessionWebhooks(TenantFrom(ctx), req.Webhooks); err != nil {
		return session.Session{}, err
	}
	if err := k.checkSessionMCP(TenantFrom(ctx), spec, req.MCPServers); err != nil {
		return session.Session{}, err
	}
	if err := k.checkPeerMCP(req.MCPServers, req.Agents); err != nil {
		return session.Session{}, err
	}
	now := k.now().UTC()
	s := session.Session{
		ID: cmp.Or(req.key, session.NewID()), Tenant: TenantFrom(ctx), Agent: req.Agent, Name: req.Name,
		Metadata: maps.Clone(req.Metadata), State: session.StateActive, CreatedAt: now, UpdatedAt: now,
		TTL: cmp.Or(req.TTL, k.retention.TTL), InheritMemory: req.InheritMemory,
	}
	s.Overrides = nonEmpty(req.Overrides)
	s.PermissionMode = req.PermissionMode
	s.Instructions = req.Instructions
	if req.Title != "" {
		s.Title, s.TitleSource = req.Title, session.TitleFromClient
	}
	s.Webhooks = req.Webhooks
	s.MCPServers = session.CloneMCPServers(req.MCPServers)
	s.SpawnKey = req.spawnKey
	s.Agents = slices.Clone(req.Agents)
	if req.IdempotencyKey != "" {
		s.RequestHash = creationHash(req)
	}
	if req.ParentID != "" && s.InheritMemory == "" {
		s.InheritMemory = InheritNone
	}
	s.ExpiresAt = expiry(now, s.TTL)
	s.RootID = s.ID
	admitted, err := k.admitSession(ctx)
	if err != nil {
		return session.Session{}, err
	}
	err = k.insertSession(ctx, &s, req.ParentID, req.spawner)
	admitted()
	if err != nil {
		return session.Session{}, err
	}
	if s.InheritMemory == InheritCopy {
		inherited, err := k.store.ListMemory(ctx, req.ParentID)
		if err != nil {
			return session.Session{}, fmt.Errorf("copy parent memory: %w", err)
		}
		entries = append(inherited, entries...) // the child's own entries win
	}
	for _, e := range entries {
		e.SessionID, e.UpdatedAt = s.ID, now
		if err := k.store.PutMemory(ctx, e, k.limits.MaxMemoryEntries); err != nil {
			return session.Session{}, fmt.Errorf("seed memory: %w", err)
		}
	}
	return s, nil
}

// checkInherit checks a request's memory inheritance.
func checkInherit(req CreateSession) error {
	switch {
	case req.InheritMemory != "" && req.InheritMemory != InheritNone && req.InheritMemory != InheritCopy:
		return errdefs.Invalid("inherit.memory", `must be "none" or "copy"`)
	case req.InheritMemory != "" && req.ParentID == "":
		return errdefs.Invalid("inherit.memory", "only a child session (with parent_id) inherits")
	}
	return nil
}

// runnableAgent returns the named agent if it can run now.
func (k *Kernel) runnableAgent(name string) (agents.Spec, error) {
	spec, err := k.agents.Get(name)
	if err != nil {
		return spec, err
	}
	if spec.Unavailable != "" {
		return spec, errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeAgentUnavailable, "agent %q is unavailable: %s", name, spec.Unavailable)
	}
	return spec, nil
}

// insertSession stores s, as a child of parentID, spawned by agent
// spawner, when parentID is set. A child is placed and stored under its
// parent's lock, so concurrent creations cannot exceed the parent's
// limits and a parent being deleted (closed first, under the same lock)
// takes no new child.
func (k *Kernel) insertSession(ctx context.Context, s *session.Session, parentID, spawner string) error {
	if err := k.checkOpen(); err != nil {
		return err
	}
	if parentID != "" {
		unlock := k.lockSession(parentID)
		defer unlock()
		if err := k.placeUnder(ctx, s, parentID, spawner); err != nil {
			return err
		}
	}
	if err := k.store.CreateSession(ctx, *s); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	k.feedChanged(s.Tenant, s.ID, FeedSessionCreated)
	return nil
}

// placeUnder makes s a child of parentID, enforcing the max_depth of every
// ancestor's agent and the max_children of the agent that spawns it: the
// parent's own, or spawner, the agent whose turn it is on the parent
// (limits are the agent's that runs, see peers.go).
func (k *Kernel) placeUnder(ctx context.Context, s *session.Session, parentID, spawner string) error {
	parent, err := k.GetSession(ctx, parentID)
	if errdefs.CodeOf(err) == errdefs.CodeSessionNotFound {
		return errdefs.New(errdefs.ErrNotFound, errdefs.CodeParentNotFound, "parent session %q not found", parentID)
	} else if err != nil {
		return err
	}
	if parent.State == session.StateClosed {
		return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionClosed, "parent session %s is closed", session.PublicID(parent.ID))
	}
	spec, err := k.agents.Get(cmp.Or(spawner, parent.Agent))
	if err != nil {
		return err
	}
	if err := k.checkDepth(ctx, parent, spec); err != nil {
		return err
	}
	open, err := k.openChildren(ctx, parent.ID)
	if err != nil {
		return err
	}
	if open >= spec.Limits.MaxChildren {
		return errdefs.New(errdefs.ErrExhausted, errdefs.CodeMaxChildrenExceeded,
			"agent %q allows %d open child sessions", spec.Name, spec.Limits.MaxChildren)
	}
	s.ParentID, s.RootID, s.Depth = parent.ID, parent.RootID, parent.Depth+1
	return nil
}

// openChildren counts the children of id that are not closed.
func (k *Kernel) openChildren(ctx context.Context, id string) (int, error) {
	children, err := k.store.ListSessions(ctx, SessionQuery{ParentID: id})
	if err != nil {
		return 0, fmt.Errorf("list children: %w", err)
	}
	n := 0
	for _, c := range children {
		if c.State != session.StateClosed {
			n++
		}
	}
	return n, nil
}

// GetSession returns a session of the caller's tenant, by the id the
// caller knows it by (see sessionKeys): callers go on with the returned
// session's ID, the key it is stored under.
func (k *Kernel) GetSession(ctx context.Context, id string) (session.Session, error) {
	tenant := TenantFrom(ctx)
	for _, key := range sessionKeys(tenant, id) {
		s, err := k.store.GetSession(ctx, key)
		if err == nil && s.Tenant == tenant {
			return s, nil
		}
		if err != nil && errdefs.CodeOf(err) != errdefs.CodeSessionNotFound {
			return session.Session{}, fmt.Errorf("get session: %w", err)
		}
	}
	return session.Session{}, errdefs.New(errdefs.ErrNotFound, errdefs.CodeSessionNotFound, "session %q not found", id)
}

// ListSessions returns a page of the caller's sessions, newest first.
func (k *Kernel) ListSessions(ctx context.Context, req ListSessions) (Page[session.Session], error) {
	limit, err := req.Page.size()
	if err != nil {
		return Page[session.Session]{}, err
	}
	place, err := decodeCursor(req.Page.Cursor)
	if err != nil {
		return Page[session.Session]{}, err
	}
	after, err := sessionCursor(place)
	if err != nil {
		return Page[session.Session]{}, err
	}
	if req.ParentID != "" {
		if parent, err := k.GetSession(ctx, req.ParentID); err == nil {
			req.ParentID = parent.ID
		}
	}
	if req.State != "" && !req.State.Valid() {
		return Page[session.Session]{}, errdefs.Invalid("state", "unknown session state")
	}
	items, err := k.store.ListSessions(ctx, SessionQuery{
		Tenant: TenantFrom(ctx), Agent: req.Agent, State: req.State, ParentID: req.ParentID,
		ForkedFrom: req.ForkedFrom, Metadata: req.Metadata, CreatedAfter: req.CreatedAfter, CreatedBefore: req.CreatedBefore,
		Search: req.Search, After: after, Limit: limit + 1,
	})
	if err != nil {
		return Page[session.Session]{}, fmt.Errorf("list sessions: %w", err)
	}
	return paginate(items, limit, sessionPlace), nil
}

// Children returns a page of the direct children of session id.
func (k *Kernel) Children(ctx context.Context, id string, page PageRequest) (Page[session.Session], error) {
	s, err := k.GetSession(ctx, id)
	if err != nil {
		return Page[session.Session]{}, err
	}
	id = s.ID // the key it is stored under
	return k.ListSessions(ctx, ListSessions{ParentID: id, Page: page})
}

// UpdateSession changes a session's name or metadata.
func (k *Kernel) UpdateSession(ctx context.Context, id string, u SessionUpdate) (session.Session, error) {
	s, err := k.GetSession(ctx, id)
	if err != nil {
		return session.Session{}, err
	}
	if err := k.checkSessionOverrides(s, u.Overrides); err != nil {
		return session.Session{}, err
	}
	if err := k.checkSessionPermissionMode(s, u.PermissionMode); err != nil {
		return session.Session{}, err
	}
	if u.Agents != nil {
		if err := k.checkSessionAgents(s.Agent, *u.Agents); err != nil {
			return session.Session{}, err
		}
	}
	if u.Title != nil {
		if err := k.validateTitle(*u.Title); err != nil {
			return session.Session{}, err
		}
	}
	if u.Instructions != nil {
		if err := validateInstructions(*u.Instructions); err != nil {
			return session.Session{}, err
		}
	}
	if err := k.checkSessionMCPUpdate(s, u.MCPServers); err != nil {
		return session.Session{}, err
	}
	if err := k.checkSessionPeerMCP(s, u); err != nil {
		return session.Session{}, err
	}
	id = s.ID // the key it is stored under
	var out session.Session
	err = k.updateSession(ctx, id, func(s *session.Session) error {
		if s.State == session.StateClosed {
			return sessionClosed(s.ID)
		}
		if u.Name != nil {
			s.Name = *u.Name
		}
		if u.Title != nil {
			s.Title, s.TitleSource, s.TitleLogged = *u.Title, session.TitleFromClient, false
		}
		if u.Overrides != nil {
			s.Overrides = nonEmpty(u.Overrides)
		}
		if u.PermissionMode != nil {
			s.PermissionMode = *u.PermissionMode
		}
		if u.Instructions != nil {
			s.Instructions = *u.Instructions
		}
		if u.MCPServers != nil {
			if s.ActiveRunID != "" {
				return mcpServersBusy(s.ID, s.ActiveRunID)
			}
			s.MCPServers = session.CloneMCPServers(*u.MCPServers)
		}
		if u.Agents != nil {
			s.Agents = slices.Clone(*u.Agents)
		}
		s.Metadata = mergeMetadata(s.Metadata, u.Metadata)
		if err := k.validateSessionFields(s.Name, s.Metadata); err != nil {
			return err
		}
		s.UpdatedAt = k.now().UTC()
		out = *s
		return nil
	})
	if err != nil {
		return session.Session{}, err
	}
	out.Version++
	if u.MCPServers != nil {
		k.stopSessionMCP(out.ID) // the next run starts those it names now
	}
	k.feedChanged(out.Tenant, out.ID, FeedSessionUpdated)
	return out, nil
}

// mergeMetadata applies a patch to m: nil values delete keys.
func mergeMetadata(m map[string]string, patch map[string]*string) map[string]string {
	if len(patch) == 0 {
		return m
	}
	out := maps.Clone(m)
	if out == nil {
		out = make(map[string]string, len(patch))
	}
	for key, v := range patch {
		if v == nil {
			delete(out, key)
		} else {
			out[key] = *v
		}
	}
	return out
}

// validateTitle checks a title's length against the bound of names.
func (k *Kernel) validateTitle(title string) error {
	if len(title) > k.limits.MaxNameLength {
		return errdefs.Invalid("title", fmt.Sprintf("longer than %d bytes", k.limits.MaxNameLength))
	}
	return nil
}

// validateSessionFields checks a session's name and metadata bounds.
func (k *Kernel) validateSessionFields(name string, md map[string]string) error {
	var v *errdefs.ValidationError
	if len(name) > k.limits.MaxNameLength {
		v = v.Add("name", fmt.Sprintf("longer than %d bytes", k.limits.MaxNameLength))
	}
	if len(md) > k.limits.MaxMetadataKeys {
		v = v.Add("metadata", fmt.Sprintf("more than %d keys", k.limits.MaxMetadataKeys))
	}
	for key, val := range md {
		switch {
		case key == "" || len(key) > k.limits.MaxMetadataKeyLen:
			v = v.Add("metadata", fmt.Sprintf("keys must be 1 to %d bytes", k.limits.MaxMetadataKeyLen))
		case len(val) > k.limits.MaxMetadataValueLen:
			v = v.Add("metadata."+key, fmt.Sprintf("longer than %d bytes", k.limits.MaxMetadataValueLen))
		}
	}
	return v.Err()
}
