package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/tools/mcp"
)

// MCPConfig configures the MCP servers clients attach to sessions; the
// agents' own are in their files.
type MCPConfig struct {
	Sessions SessionMCPConfig `yaml:"sessions"`
}

// SessionMCPConfig bounds the MCP servers clients attach to sessions, and
// holds what a client may only name: the stdio servers it may run and the
// tenants' secrets its header values may refer to.
type SessionMCPConfig struct {
	MaxPerSession int           `yaml:"max_per_session"`
	MaxPerTenant  int           `yaml:"max_per_tenant"` // running at once, over the tenant's sessions
	IdleTimeout   time.Duration `yaml:"idle_timeout"`   // a session's servers stop once it ran nothing for this long
	// Stdio is the operator's allow-list: a session names a server by its
	// key here, never by a command.
	Stdio map[string]StdioServerConfig `yaml:"stdio"`
	// Secrets are the tenants' secrets, by tenant then name: a header value
	// "Bearer ${NAME}" of a session's server takes the tenant's NAME. Use
	// ${VAR} here to keep the values out of the file.
	Secrets map[string]map[string]string `yaml:"secrets"`
}

// StdioServerConfig is a command that speaks MCP over stdio.
type StdioServerConfig struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
}

func defaultMCPConfig() MCPConfig {
	return MCPConfig{Sessions: SessionMCPConfig{MaxPerSession: 8, MaxPerTenant: 16, IdleTimeout: 10 * time.Minute}}
}

func (c MCPConfig) check() error {
	s := c.Sessions
	if s.MaxPerSession <= 0 || s.MaxPerTenant <= 0 || s.IdleTimeout <= 0 {
		return errors.New("mcp.sessions: max_per_session, max_per_tenant and idle_timeout must be positive")
	}
	for name, srv := range s.Stdio {
		if srv.Command == "" {
			return fmt.Errorf("mcp.sessions.stdio.%s: command is required", name)
		}
	}
	return nil
}

// sessionMCP returns the kernel's settings for the sessions' MCP servers.
func (c MCPConfig) sessionMCP() kernel.SessionMCP {
	s := c.Sessions
	stdio := make(map[string]mcp.ServerConfig, len(s.Stdio))
	for name, srv := range s.Stdio {
		stdio[name] = mcp.ServerConfig{Name: name, Command: srv.Command, Args: srv.Args, Env: srv.Env}
	}
	secrets := s.Secrets
	return kernel.SessionMCP{
		Stdio: stdio, MaxPerSession: s.MaxPerSession, MaxPerTenant: s.MaxPerTenant, IdleTimeout: s.IdleTimeout,
		Secret: func(tenant, name string) (string, bool) {
			v, ok := secrets[tenant][name]
			return v, ok
		},
	}
}
