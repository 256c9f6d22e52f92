package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Permission modes and standing approvals.
//
// A tool the agent marks require_approval waits for a person, unless the
// session says otherwise: its permission_mode (read_only_auto approves
// tools that only read, auto approves all) or a standing approval a person
// gave with the decision "always". The agent's permission_modes bound the
// modes its sessions may choose, and are checked again at each call, so
// an agent file reloaded without a mode stops it at once. Every call
// approved without asking is logged as CUSTOM kerneld.approval.auto with
// the reason, where a person would otherwise have answered.

// approvalAuto is the CUSTOM event of a call approved without asking.
const approvalAuto = "kerneld.approval.auto"

// checkPermissionMode checks that a session of spec may choose mode m;
// "" keeps the session's mode.
func checkPermissionMode(spec agents.Spec, m string) error {
	if m == "" {
		return nil
	}
	if !slices.Contains(agents.PermissionModes, m) {
		return errdefs.Invalid("permission_mode", "must be one of "+strings.Join(agents.PermissionModes, ", "))
	}
	if !spec.AllowsPermissionMode(m) {
		allowed := spec.AllowedPermissionModes()
		return errdefs.New(errdefs.ErrUnprocessable, errdefs.CodePermissionModeNotAllowed,
			"agent %q does not allow permission_mode %q; its sessions may choose %s (agent file: permission_modes)",
			spec.Name, m, strings.Join(allowed, ", ")).With("allowed", allowed)
	}
	return nil
}

// checkSessionPermissionMode checks a change of session s's mode; nil
// changes nothing.
func (k *Kernel) checkSessionPermissionMode(s session.Session, m *string) error {
	if m == nil {
		return nil
	}
	if *m == "" {
		return errdefs.Invalid("permission_mode", "must be one of "+strings.Join(agents.PermissionModes, ", "))
	}
	spec, err := k.agents.Get(s.Agent)
	if err != nil {
		return err
	}
	return checkPermissionMode(spec, *m)
}

// permissions is what a run consults before asking a person.
type permissions struct {
	mode   string
	grants []session.Grant
}

// permissions reads the session's mode and standing approvals, with those
// given by decisions during this run that the session may not show yet.
func (r *runner) permissions() (permissions, error) {
	s, err := r.k.store.GetSession(r.storeCtx(), r.run.SessionID)
	if err != nil {
		return permissions{}, &emitError{err: fmt.Errorf("get session: %w", err)}
	}
	mode := s.PermissionMode
	if !r.spec.AllowsPermissionMode(mode) {
		mode = agents.PermissionAsk
	}
	grants := slices.DeleteFunc(append(slices.Clone(s.Grants), r.grants...), func(g session.Grant) bool {
		return g.Agent != r.run.Agent // a grant covers the calls of the agent it was given to
	})
	return permissions{mode: mode, grants: grants}, nil
}

// autoReason says why call c may go ahead without asking, or "" when a
// person must decide.
func (r *runner) autoReason(p permissions, c session.ToolCall) string {
	if g, ok := session.GrantFor(p.grants, c); ok {
		return grantReason(g)
	}
	switch p.mode {
	case agents.PermissionAuto:
		return "permission_mode auto approves every call"
	case agents.PermissionReadOnlyAuto:
		if t, err := r.resolveTool(c); err == nil && t.Definition().ReadOnly {
			return fmt.Sprintf("permission_mode read_only_auto: %s only reads (%s)", c.Name, readOnlySource(r.spec, c.Name))
		}
	}
	return ""
}

// readOnlySource says who declared tool name read-only.
func readOnlySource(spec agents.Spec, name string) string {
	if _, ok := spec.MCPServerOf(name); ok {
		return "MCP readOnlyHint"
	}
	return "built-in"
}

// grantReason says which standing approval covers a call.
func grantReason(g session.Grant) string {
	if g.Arguments != "" {
		return fmt.Sprintf("approved always for these arguments in this session (decision on %s)", g.ToolCallID)
	}
	return fmt.Sprintf("approved always in this session (decision on %s)", g.ToolCallID)
}

// approveWithoutAsking starts the calls of gated that the session's
// permissions approve, logging why, and returns those a person must
// decide.
func (b *toolBatch) approveWithoutAsking(gated []session.ToolCall) ([]session.ToolCall, error) {
	if len(gated) == 0 {
		return nil, nil
	}
	p, err := b.r.permissions()
	if err != nil {
		return nil, err
	}
	var ask []session.ToolCall
	for _, c := range gated {
		reason := b.r.autoReason(p, c)
		if reason == "" {
			ask = append(ask, c)
			continue
		}
		if err := b.r.emit(autoApprovedEvent(c, p.mode, reason)); err != nil {
			return nil, err
		}
		b.start(c)
	}
	return ask, nil
}

// autoApprovedEvent is the log's record of call c approved without asking.
func autoApprovedEvent(c session.ToolCall, mode, reason string) session.Event {
	return session.Custom(approvalAuto, map[string]any{
		"toolCallId": c.ID, "toolName": c.Name, "arguments": argumentsValue(c.Arguments),
		"permissionMode": mode, "reason": reason,
	})
}

// grantOf is the standing approval a decision "always" on call c gives.
func grantOf(c session.ToolCall, sameArguments bool, agent string) session.Grant {
	g := session.Grant{Tool: c.Name, ToolCallID: c.ID, Agent: agent}
	if sameArguments {
		g.Arguments = session.CanonicalArguments(c.Arguments)
	}
	return g
}

// applyGrant approves, without asking further, the calls of the batch
// still awaiting a decision that grant g, just given, covers. Their requests are in the log, so each is resolved there.
func (b *toolBatch) applyGrant(g session.Grant, keep func(error)) {
	for id, c := range b.gated {
		if !g.Covers(c) {
			continue
		}
		delete(b.gated, id)
		b.r.unawait(id)
		keep(b.r.emit(resolvedEvent(id, DecisionApprove, grantReason(g))))
		b.start(c)
	}
}

// unawait makes call id unreachable by decisions: it was decided another
// way.
func (r *runner) unawait(id string) {
	r.h.mu.Lock()
	delete(r.ar.awaiting, id)
	r.h.mu.Unlock()
}

// addGrant records a standing approval on session id, unless one that
// covers as much is there.
func (k *Kernel) addGrant(ctx context.Context, id string, g session.Grant) error {
	return k.updateSession(ctx, id, func(s *session.Session) error {
		for _, have := range s.Grants {
			if have.Tool == g.Tool && have.Agent == g.Agent && (have.Arguments == "" || have.Arguments == g.Arguments) {
				return errUnchanged
			}
		}
		s.Grants = append(s.Grants, g)
		return nil
	})
}
