package agents

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// namePattern keeps agent names safe in URLs, logs and file names.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// maxMaxTurns caps max_turns so a typo cannot make a run loop for hours.
const maxMaxTurns = 1000

// sourceError is a problem with one agent definition. Its text starts with
// where the agent came from, so an operator knows which file to fix. It
// matches errdefs.ErrInvalid and also unwraps to the underlying cause.
type sourceError struct {
	source string
	err    error
}

func (e *sourceError) Error() string   { return e.source + ": " + e.err.Error() }
func (e *sourceError) Unwrap() []error { return []error{errdefs.ErrInvalid, e.err} }

// source names where s came from: its file, or the agent for one built in
// code.
func source(s Spec) string {
	if s.File != "" {
		return s.File
	}
	return fmt.Sprintf("agent %q", s.Name)
}

// fieldError reports a problem with one field, e.g. "max_turns: must be ...".
func fieldError(field, format string, args ...any) error {
	return errors.New(field + ": " + fmt.Sprintf(format, args...))
}

// prepare validates s and builds its Provider if it has none. Errors name
// the source and the field.
func prepare(s Spec, opts Options) (Spec, error) {
	if err := validate(s, opts); err != nil {
		return Spec{}, &sourceError{source: source(s), err: err}
	}
	if s.Provider == nil {
		p, err := opts.Providers[s.Model.Provider](s.Model)
		if err == nil && p == nil {
			err = fmt.Errorf("provider %q built no model", s.Model.Provider)
		}
		switch {
		case errors.Is(err, errdefs.ErrUnavailable):
			s.Unavailable = unavailableReason(err, s.unsetEnv)
		case err != nil:
			return Spec{}, &sourceError{source: source(s), err: fmt.Errorf("model: %w", err)}
		}
		s.Provider = p
	}
	s.Tools = slices.Clip(s.Tools) // an append by a reader must not write into the registry's array
	s.unsetEnv = nil               // needed only while loading
	return s, nil
}

// unavailableReason says why a provider could not be built, naming the
// unset variable behind the field it lacks (a factory names the field in
// its error's "field" member): usually the fix.
func unavailableReason(err error, unset map[string][]string) string {
	e, ok := errors.AsType[*errdefs.Error](err)
	if !ok {
		return err.Error()
	}
	field, _ := e.Extra["field"].(string)
	reason := e.Message + notSet(unset[field])
	if alt, _ := e.Extra["or_field"].(string); alt != "" {
		reason += "; or set " + alt + notSet(unset[alt]) + " to a server that needs no key"
	}
	return reason
}

// notSet says which of a field's ${VAR}s were not set, if any.
func notSet(vars []string) string {
	if len(vars) == 0 {
		return ""
	}
	return " (" + strings.Join(slices.Compact(slices.Sorted(slices.Values(vars))), ", ") + " not set)"
}

// validate checks s, whose defaults are already applied, field by field
// and returns the first problem.
func validate(s Spec, opts Options) error {
	if err := validateName(s.Name); err != nil {
		return err
	}
	if err := validateModel(s, opts); err != nil {
		return err
	}
	if err := validateLimits(s); err != nil {
		return err
	}
	if err := validateMCPServers(s.MCPServers); err != nil {
		return err
	}
	if err := validateAgentNames("child_agents", s.ChildAgents); err != nil {
		return err
	}
	if err := validateAgentNames("peers", s.Peers); err != nil {
		return err
	}
	if err := validateOverrides(s.Overrides); err != nil {
		return err
	}
	if err := validateCompaction(s.Memory.Compaction); err != nil {
		return err
	}
	if err := validateHooks(s, opts); err != nil {
		return err
	}
	return validateTools(s, opts.KnownTool)
}

// validateName checks the agent's name.
func validateName(name string) error {
	switch {
	case name == "":
		return fieldError("name", "required")
	case !namePattern.MatchString(name):
		return fieldError("name", "%q must be 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'", name)
	}
	return nil
}

// validateModel checks that a provider can be built for s. A spec that
// brings its own Provider needs no factory.
func validateModel(s Spec, opts Options) error {
	if s.Model.MaxTokens < 0 {
		return fieldError("model.max_tokens", "must not be negative")
	}
	if s.Provider != nil {
		return nil
	}
	if s.Model.Provider == "" {
		return fieldError("model.provider", "required")
	}
	if opts.Providers[s.Model.Provider] == nil {
		return fieldError("model.provider", "unknown provider %q (known: %s)", s.Model.Provider, knownProviders(opts))
	}
	return nil
}

// knownProviders lists the provider names opts offers, for error messages.
func knownProviders(opts Options) string {
	names := slices.Sorted(maps.Keys(opts.Providers))
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// validateLimits checks max_turns, limits and memory.
func validateLimits(s Spec) error {
	switch {
	case s.MaxTurns < 1 || s.MaxTurns > maxMaxTurns:
		return fieldError("max_turns", "must be between 1 and %d, got %d", maxMaxTurns, s.MaxTurns)
	case s.Limits.MaxChildren < 0:
		return fieldError("limits.max_children", "must not be negative")
	case s.Limits.MaxDepth < 0:
		return fieldError("limits.max_depth", "must not be negative")
	case s.Limits.RunTimeout <= 0:
		return fieldError("limits.run_timeout", "must be positive")
	case s.Memory.MaxHistoryMessages < 1:
		return fieldError("memory.max_history_messages", "must be at least 1")
	case s.ApprovalTimeout <= 0:
		return fieldError("approval_timeout", "must be positive")
	case s.MaxResumes < 0:
		return fieldError("max_resumes", "must not be negative")
	case s.OnCrash != OnCrashContinue && s.OnCrash != OnCrashInterrupt:
		return fieldError("on_crash", "must be %q or %q, got %q", OnCrashContinue, OnCrashInterrupt, s.OnCrash)
	case s.ChildResults != ChildResultsQueue && s.ChildResults != ChildResultsSteer:
		return fieldError("child_results", "must be %q or %q, got %q", ChildResultsQueue, ChildResultsSteer, s.ChildResults)
	}
	for _, m := range s.PermissionModes {
		if !slices.Contains(PermissionModes, m) {
			return fieldError("permission_modes", "%q is not one of %s", m, strings.Join(PermissionModes, ", "))
		}
	}
	return nil
}

// serverPattern keeps MCP server names usable as tool name prefixes.
var serverPattern = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// validateMCPServers checks each server's name and transport.
func validateMCPServers(servers []MCPServer) error {
	seen := map[string]int{}
	for i, srv := range servers {
		field := fmt.Sprintf("mcp_servers[%d]", i)
		switch {
		case srv.Name == "":
			return fieldError(field+".name", "required")
		case len(srv.Name) > 32 || !serverPattern.MatchString(srv.Name) || strings.Contains(srv.Name, MCPSeparator):
			return fieldError(field+".name", "%q must be 1-32 characters of A-Z, a-z, 0-9, '-' and single '_'", srv.Name)
		case (srv.Command == "") == (srv.URL == ""):
			return fieldError(field, "set exactly one of command (stdio) and url (streamable HTTP)")
		case srv.URL != "" && !strings.HasPrefix(srv.URL, "http://") && !strings.HasPrefix(srv.URL, "https://"):
			return fieldError(field+".url", "must be an http or https URL")
		case srv.CallTimeout <= 0:
			return fieldError(field+".call_timeout", "must be positive")
		case slices.Contains(srv.Allow, ""):
			return fieldError(field+".allow", "tool names must not be empty")
		}
		if j, dup := seen[srv.Name]; dup {
			return fieldError(field+".name", "duplicate server %q (also mcp_servers[%d])", srv.Name, j)
		}
		seen[srv.Name] = i
	}
	return nil
}

// validateAgentNames checks the agent names listed in field (the agents
// it may spawn, its peers); whether they exist is checked once every
// agent is loaded.
func validateAgentNames(field string, names []string) error {
	for i, name := range names {
		if !namePattern.MatchString(name) {
			return fieldError(fmt.Sprintf("%s[%d]", field, i), "%q is not an agent name", name)
		}
	}
	return nil
}

// validateTools checks that every tool is named once and exists: a
// built-in one, or one its MCP server allows (whose existence can only be
// known once the server runs).
func validateTools(s Spec, known func(string) bool) error {
	seen := make(map[string]int, len(s.Tools))
	for i, t := range s.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		if t.Name == "" {
			return fieldError(field+".name", "required")
		}
		if j, dup := seen[t.Name]; dup {
			return fieldError(field, "duplicate tool %q (also tools[%d])", t.Name, j)
		}
		seen[t.Name] = i
		if t.Retry != "" && t.Retry != RetrySafe && t.Retry != RetryNever {
			return fieldError(field+".retry", "must be %q or %q, got %q", RetrySafe, RetryNever, t.Retry)
		}
		if srv, ok := s.MCPServerOf(t.Name); ok {
			if !srv.Allows(strings.TrimPrefix(t.Name, srv.Name+MCPSeparator)) {
				return fieldError(field, "tool %q is not in the allow list of MCP server %q", t.Name, srv.Name)
			}
			continue
		}
		if known != nil && !known(t.Name) {
			return fieldError(field, "unknown tool %q", t.Name)
		}
	}
	return nil
}
