package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools/mcp"
)

// A session's own MCP servers. A client may attach MCP servers to one
// session (session.MCPServer): HTTP endpoints of its choosing, whose
// header values name the tenant's secrets by reference, and stdio servers
// the operator allows by name. Their tools are offered to the session's
// runs beside the agent's, named "<server>__<tool>", under the rules of
// an agent's MCP tools (the agent file's approvals, guards and permission
// mode; RequireApproval adds an approval to each call).
//
// The servers run in the kernel's MCP manager under a scope of the
// session's, so no other session shares them. A server starts on the first
// run that needs it and is shared by the session's later runs; it stops
// when the session closes or is deleted, when a client replaces the
// session's servers, or once the session has run nothing for IdleTimeout.
// A tenant's sessions run at most MaxPerTenant such servers at once: a run
// that would start more goes on without them, saying so in its log as an
// agent's server that cannot start does. Whoever takes the session over
// (another replica) starts them again for its runs.

// SessionMCP configures the MCP servers clients attach to sessions.
type SessionMCP struct {
	// Stdio lists the stdio servers a session may name, by name: the
	// operator's allow-list. A client never gives a command.
	Stdio map[string]mcp.ServerConfig
	// Secret returns the tenant's secret name, for header values that
	// name it as ${name}; nil: tenants have none.
	Secret func(tenant, name string) (string, bool)
	// MaxPerSession bounds a session's servers; default 8.
	MaxPerSession int
	// MaxPerTenant bounds the servers a tenant's sessions run at once;
	// default 16.
	MaxPerTenant int
	// IdleTimeout stops a session's servers once it has run nothing for
	// this long; default 10 minutes.
	IdleTimeout time.Duration
}

func (c SessionMCP) withDefaults() SessionMCP {
	c.MaxPerSession = cmp.Or(c.MaxPerSession, 8)
	c.MaxPerTenant = cmp.Or(c.MaxPerTenant, 16)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 10*time.Minute)
	return c
}

// mcpServerName is what a session's MCP server may be called: it prefixes
// its tools' names, which models take as [A-Za-z0-9_-]{1,64}.
var mcpServerName = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// secretRef matches a reference to a tenant's secret in a header value.
var secretRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// checkSessionMCP checks the MCP servers a client attaches to a session
// of tenant and agent spec: their shape, that the stdio ones are allowed,
// that the secrets they name exist, and that no name is the agent's.
func (k *Kernel) checkSessionMCP(tenant string, spec agents.Spec, servers []session.MCPServer) error {
	var v *errdefs.ValidationError
	if len(servers) > k.sessionMCP.cfg.MaxPerSession {
		return errdefs.Invalid("mcp_servers", fmt.Sprintf("has %d servers; a session may have at most %d", len(servers), k.sessionMCP.cfg.MaxPerSession))
	}
	seen := map[string]bool{}
	for i, srv := range servers {
		at := fmt.Sprintf("mcp_servers[%d]", i)
		switch {
		case len(srv.Name) > 32 || !mcpServerName.MatchString(srv.Name):
			v = v.Add(at+".name", "must be 1 to 32 letters, digits, '-' or single '_'")
		case seen[srv.Name]:
			v = v.Add(at+".name", fmt.Sprintf("%q names two servers", srv.Name))
		}
		seen[srv.Name] = true
		v = k.checkMCPSource(v, at, tenant, srv)
	}
	if err := v.Err(); err != nil {
		return err
	}
	return mcpNameTaken(spec, servers)
}

// mcpNameTaken refuses session MCP servers one of which has the name of
// an MCP server of agent spec, which runs on the session: their tools
// would have the same names.
func mcpNameTaken(spec agents.Spec, servers []session.MCPServer) error {
	for _, srv := range servers {
		if _, ok := spec.MCPServerOf(srv.Name + agents.MCPSeparator); ok {
			return errdefs.New(errdefs.ErrConflict, errdefs.CodeMCPServerNameTaken,
				"agent %q has an MCP server named %q already; give the session's another name", spec.Name, srv.Name).
				With("name", srv.Name).With("agent", spec.Name)
		}
	}
	return nil
}

// checkGuestMCP refuses a run of agent spec, not session s's own, when
// one of s's MCP servers has the name of one of spec's: the session's
// servers join every run's tools, whichever agent's turn it is.
func checkGuestMCP(s session.Session, spec agents.Spec) error {
	for _, srv := range s.MCPServers {
		if _, ok := spec.MCPServerOf(srv.Name + agents.MCPSeparator); ok {
			return errdefs.New(errdefs.ErrConflict, errdefs.CodeMCPServerNameTaken,
				"session %s has an MCP server named %q, and so has agent %q, whose turn this run would be; "+
					"rename the session's server (PATCH /sessions/{id} mcp_servers) for both to run", session.PublicID(s.ID), srv.Name, spec.Name).
				With("name", srv.Name).With("agent", spec.Name)
		}
	}
	return nil
}

// checkPeerMCP checks the MCP servers of a session against the MCP
// servers of the other agents it lists (names), which take turns on it.
func (k *Kernel) checkPeerMCP(servers []session.MCPServer, names []string) error {
	for _, name := range names {
		spec, err := k.agents.Get(name)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // gone from the configs since it was listed: it runs no more
		} else if err != nil {
			return err
		}
		if err := mcpNameTaken(spec, servers); err != nil {
			return err
		}
	}
	return nil
}

// checkMCPSource checks where server srv, at field at, is.
func (k *Kernel) checkMCPSource(v *errdefs.ValidationError, at, tenant string, srv session.MCPServer) *errdefs.ValidationError {
	switch {
	case (srv.URL == "") == (srv.Stdio == ""):
		return v.Add(at, `needs exactly one of "url" and "stdio"`)
	case srv.Stdio != "":
		if len(srv.Headers) > 0 {
			v = v.Add(at+".headers", "apply to url servers only")
		}
		if _, ok := k.sessionMCP.cfg.Stdio[srv.Stdio]; !ok {
			allowed := slices.Sorted(mapKeys(k.sessionMCP.cfg.Stdio))
			return v.Add(at+".stdio", fmt.Sprintf("%q is not a stdio server this kerneld allows (allowed: %s); a client never gives a command",
				srv.Stdio, cmp.Or(strings.Join(allowed, ", "), "none")))
		}
		return v
	}
	if u, err := url.Parse(srv.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v = v.Add(at+".url", "must be an absolute http or https URL")
	}
	for name, value := range srv.Headers {
		for _, m := range secretRef.FindAllStringSubmatch(value, -1) {
			if _, ok := k.secret(tenant, m[1]); !ok {
				v = v.Add(at+".headers."+name, fmt.Sprintf("names secret %q, which the tenant does not have", m[1]))
			}
		}
	}
	return v
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (k *Kernel) secret(tenant, name string) (string, bool) {
	if k.sessionMCP.cfg.Secret == nil {
		return "", false
	}
	return k.sessionMCP.cfg.Secret(tenant, name)
}

// serverConfig returns what the manager runs for server srv of session s:
// secrets put in, the session's scope set.
func (k *Kernel) serverConfig(s session.Session, srv session.MCPServer) (mcp.ServerConfig, error) {
	cfg := mcp.ServerConfig{Name: srv.Name, URL: srv.URL, Scope: s.ID}
	if srv.Stdio != "" {
		allowed, ok := k.sessionMCP.cfg.Stdio[srv.Stdio]
		if !ok {
			return mcp.ServerConfig{}, fmt.Errorf("stdio server %q is no longer allowed: %w", srv.Stdio, errdefs.ErrUnavailable)
		}
		allowed.Name, allowed.Scope = srv.Name, s.ID
		return allowed, nil
	}
	var missing string
	for name, value := range srv.Headers {
		if cfg.Headers == nil {
			cfg.Headers = make(map[string]string, len(srv.Headers))
		}
		cfg.Headers[name] = secretRef.ReplaceAllStringFunc(value, func(ref string) string {
			v, ok := k.secret(s.Tenant, ref[2:len(ref)-1])
			if !ok {
				missing = ref
			}
			return v
		})
	}
	if missing != "" {
		return mcp.ServerConfig{}, fmt.Errorf("the tenant has no secret %s any more: %w", missing, errdefs.ErrUnavailable)
	}
	return cfg, nil
}

// sessionServers tracks the sessions whose MCP servers run here.
type sessionServers struct {
	cfg  SessionMCP
	mu   sync.Mutex
	live map[string]*liveServers // by session id
}

// liveServers are the servers of one session that run, or may.
type liveServers struct {
	tenant   string
	configs  []mcp.ServerConfig
	runs     int       // runs using them now
	lastUsed time.Time // when the last of those ended
}

func newSessionServers(cfg SessionMCP) *sessionServers {
	return &sessionServers{cfg: cfg.withDefaults(), live: make(map[string]*liveServers)}
}

// hold counts a run of session s using configs, whose servers are now
// the session's; it refuses when the tenant's other sessions run too many.
func (ss *sessionServers) hold(s session.Session, configs []mcp.ServerConfig) (stale []mcp.ServerConfig, err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := len(configs)
	for id, l := range ss.live {
		if id != s.ID && l.tenant == s.Tenant {
			n += len(l.configs)
		}
	}
	if n > ss.cfg.MaxPerTenant {
		return nil, fmt.Errorf("the tenant's sessions run %d MCP servers of their own, at most %d at once: %w",
			n-len(configs), ss.cfg.MaxPerTenant, errdefs.ErrExhausted)
	}
	l := ss.live[s.ID]
	if l == nil {
		l = &liveServers{tenant: s.Tenant}
		ss.live[s.ID] = l
	}
	for _, old := range l.configs {
		if !slices.ContainsFunc(configs, func(c mcp.ServerConfig) bool { return sameServer(c, old) }) {
			stale = append(stale, old)
		}
	}
	l.configs = configs
	l.runs++
	return stale, nil
}

func sameServer(a, b mcp.ServerConfig) bool {
	return a.Name == b.Name && a.URL == b.URL && a.Command == b.Command && slices.Equal(a.Args, b.Args) &&
		mapsEqual(a.Headers, b.Headers) && mapsEqual(a.Env, b.Env)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// release ends a run's use of session id's servers.
func (ss *sessionServers) release(id string, now time.Time) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if l := ss.live[id]; l != nil {
		l.runs--
		l.lastUsed = now
	}
}

// take forgets session id's servers and returns them, to be stopped.
func (ss *sessionServers) take(id string) []mcp.ServerConfig {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	l := ss.live[id]
	if l == nil || l.runs > 0 {
		return nil
	}
	delete(ss.live, id)
	return l.configs
}

// idle returns the sessions whose servers nothing used since before.
func (ss *sessionServers) idle(before time.Time) []string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []string
	for id, l := range ss.live {
		if l.runs == 0 && l.lastUsed.Before(before) {
			out = append(out, id)
		}
	}
	return out
}

// sessions returns the sessions whose servers may run.
func (ss *sessionServers) sessions() []string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]string, 0, len(ss.live))
	for id := range ss.live {
		out = append(out, id)
	}
	return out
}

// configs returns the configurations of every session's servers.
func (ss *sessionServers) configs() []mcp.ServerConfig {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []mcp.ServerConfig
	for _, l := range ss.live {
		out = append(out, l.configs...)
	}
	return out
}

// configsOf returns session id's servers' configurations, if they may run.
func (ss *sessionServers) configsOf(id string) []mcp.ServerConfig {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if l := ss.live[id]; l != nil {
		return slices.Clone(l.configs)
	}
	return nil
}

// stopSessionMCP stops the MCP servers of session id, unless a run uses
// them now.
func (k *Kernel) stopSessionMCP(id string) {
	if cfgs := k.sessionMCP.take(id); len(cfgs) > 0 {
		k.log.Info("stopping session mcp servers", "session", id, "servers", len(cfgs))
		k.mcp.Stop(cfgs...)
	}
}

// sessionMCPLoop stops the servers of sessions idle past the timeout,
// closed, deleted or taken by another replica, until the kernel closes.
func (k *Kernel) sessionMCPLoop() {
	every := min(max(k.sessionMCP.cfg.IdleTimeout/4, 50*time.Millisecond), 5*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range k.sessionMCP.idle(k.now().Add(-k.sessionMCP.cfg.IdleTimeout)) {
			k.stopSessionMCP(id)
		}
		for _, id := range k.sessionMCP.sessions() {
			s, err := k.store.GetSession(k.ctx, id)
			if errdefs.CodeOf(err) == errdefs.CodeSessionNotFound || (err == nil && s.State == session.StateClosed) {
				k.stopSessionMCP(id)
			}
		}
	}
}

// prepareSessionMCP offers the run's model the tools of the MCP servers
// attached to its session, starting them if need be. The run's spec gains
// the servers, so that its calls of their tools follow the rules of the
// agent's own MCP tools.
func (r *runner) prepareSessionMCP(ctx context.Context) error {
	s, err := r.k.store.GetSession(ctx, r.run.SessionID)
	if err != nil || len(s.MCPServers) == 0 {
		return err
	}
	configs := make([]mcp.ServerConfig, 0, len(s.MCPServers))
	failed := map[string]error{}
	for _, srv := range s.MCPServers {
		cfg, err := r.k.serverConfig(s, srv)
		if err != nil {
			failed[srv.Name] = err
			continue
		}
		configs = append(configs, cfg)
	}
	stale, err := r.k.sessionMCP.hold(s, configs)
	if err != nil {
		for _, cfg := range configs {
			failed[cfg.Name] = err
		}
		configs = nil
	} else {
		r.sessionMCPHeld = true
		r.k.mcp.Stop(stale...)
	}
	r.spec = withSessionServers(r.spec, s.MCPServers)
	for _, srv := range s.MCPServers {
		i := slices.IndexFunc(configs, func(c mcp.ServerConfig) bool { return c.Name == srv.Name })
		if i < 0 {
			if err := r.mcpServerDown(srv.Name, failed[srv.Name]); err != nil {
				return err
			}
			continue
		}
		all, err := r.k.mcp.Tools(ctx, configs[i])
		if err != nil {
			if err := r.mcpServerDown(srv.Name, err); err != nil {
				return err
			}
			continue
		}
		r.offerMCPTools(all, srv.RequireApproval)
	}
	return nil
}

// withSessionServers returns spec with the session's servers beside its
// own, sharing no memory with spec.
func withSessionServers(spec agents.Spec, servers []session.MCPServer) agents.Spec {
	spec.MCPServers = slices.Clone(spec.MCPServers)
	spec.Tools = slices.Clone(spec.Tools)
	for _, srv := range servers {
		spec.MCPServers = append(spec.MCPServers, agents.MCPServer{Name: srv.Name, URL: srv.URL})
	}
	return spec
}

// releaseSessionMCP ends the run's use of its session's servers.
func (r *runner) releaseSessionMCP() {
	if r.sessionMCPHeld {
		r.k.sessionMCP.release(r.run.SessionID, r.k.now())
	}
}

// SessionMCPStatus reports how the MCP servers attached to session s are
// doing here, without starting any.
func (k *Kernel) SessionMCPStatus(s session.Session) []MCPServerStatus {
	running := k.sessionMCP.configsOf(s.ID)
	out := make([]MCPServerStatus, len(s.MCPServers))
	for i, srv := range s.MCPServers {
		st := MCPServerStatus{Name: srv.Name, Transport: "http", State: mcp.StateStopped}
		if srv.Stdio != "" {
			st.Transport = "stdio"
		}
		if j := slices.IndexFunc(running, func(c mcp.ServerConfig) bool { return c.Name == srv.Name }); j >= 0 {
			st.State, st.Err = k.mcp.Status(running[j])
		}
		out[i] = st
	}
	return out
}

// checkSessionMCPUpdate checks servers, when not nil, as the new MCP
// servers of session s.
func (k *Kernel) checkSessionMCPUpdate(s session.Session, servers *[]session.MCPServer) error {
	if servers == nil {
		return nil
	}
	if s.ActiveRunID != "" {
		return mcpServersBusy(s.ID, s.ActiveRunID)
	}
	spec, err := k.runnableAgent(s.Agent)
	if err != nil {
		return err
	}
	return k.checkSessionMCP(s.Tenant, spec, *servers)
}

// checkSessionPeerMCP checks an update u of session s: its MCP servers,
// as they will be, against the other agents it will list.
func (k *Kernel) checkSessionPeerMCP(s session.Session, u SessionUpdate) error {
	servers, names := s.MCPServers, s.Agents
	if u.MCPServers != nil {
		servers = *u.MCPServers
	}
	if u.Agents != nil {
		names = *u.Agents
	}
	if u.MCPServers == nil && u.Agents == nil {
		return nil
	}
	return k.checkPeerMCP(servers, names)
}

// mcpServersBusy refuses to change the MCP servers of a session whose
// run activeRunID uses them.
func mcpServersBusy(id, activeRunID string) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionBusy,
		"session %s is running %s; change its mcp_servers once it is idle", session.PublicID(id), activeRunID).With("active_run_id", activeRunID)
}
