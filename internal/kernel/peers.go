package kernel

import (
	"cmp"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// Several agents on one conversation. A run may name another agent than
// its session's (RunRequest.Agent): it then runs as that agent (its
// prompt, model, tools, limits and approvals) on the session's one
// history. Three parties must agree: the session lists the agent in its
// agents, and each agent's file names the other in peers. The run
// records the agent (session.Run.Agent), RUN_STARTED says it in
// metadata.kerneld.agent, and every assistant message keeps the agent
// that wrote it, which models that have a field for it (OpenAI's name)
// see once two agents have spoken. Session overrides are the session
// agent's: another agent's run takes only its own; a standing approval
// covers the calls of the agent that was given it; the children a run
// spawns are bounded by its agent's limits (placeUnder), and a background
// child's answer goes back to the agent that spawned it (postChildResult).
// The tenant's quotas (internal/quota) are the tenant's, whichever agent
// runs.

// MaxSessionAgents bounds a session's agents list.
const MaxSessionAgents = 16

// runAgent returns the agent a run of session s runs as: the session's,
// or name when the session and both agents' files allow it to take a
// turn. name "" or the session's own agent means the session's.
func (k *Kernel) runAgent(s session.Session, name string) (agents.Spec, error) {
	if name == "" || name == s.Agent {
		return k.runnableAgent(s.Agent)
	}
	if !slices.Contains(s.Agents, name) {
		return agents.Spec{}, agentNotAllowed("session %s does not list agent %q in its agents (it lists: %s)",
			session.PublicID(s.ID), name, listOrNone(s.Agents))
	}
	if err := k.checkPeers(s.Agent, name); err != nil {
		return agents.Spec{}, err
	}
	return k.runnableAgent(name)
}

// checkPeers returns an error unless agents host and guest name each
// other in peers.
func (k *Kernel) checkPeers(host, guest string) error {
	h, err := k.agents.Get(host)
	if err != nil {
		return err
	}
	g, err := k.agents.Get(guest)
	if err != nil {
		return err
	}
	switch {
	case !h.PeersWith(guest):
		return agentNotAllowed("agent %q does not name %q in its peers", host, guest)
	case !g.PeersWith(host):
		return agentNotAllowed("agent %q does not name %q in its peers", guest, host)
	}
	return nil
}

// checkSessionAgents checks the agents a session of agent host lists.
func (k *Kernel) checkSessionAgents(host string, names []string) error {
	if len(names) > MaxSessionAgents {
		return errdefs.Invalid("agents", "at most 16 agents")
	}
	for i, name := range names {
		if name == host || slices.Contains(names[:i], name) {
			return errdefs.Invalid("agents", "names "+name+" twice, or the session's own agent")
		}
		if err := k.checkPeers(host, name); err != nil {
			return err
		}
	}
	return nil
}

// agentNotAllowed is the refusal of an agent that may not take a turn.
func agentNotAllowed(format string, args ...any) error {
	return errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeAgentNotAllowed, format, args...)
}

func listOrNone(names []string) string {
	return cmp.Or(strings.Join(names, ", "), "none")
}

// specOf returns the agent run r of session s runs as.
func (k *Kernel) specOf(s session.Session, r session.Run) (agents.Spec, error) {
	return k.runnableAgent(cmp.Or(r.Agent, s.Agent))
}

// named returns msgs as the model of agent self sees them: with the names
// of the agents that wrote them once another agent has spoken (or self is
// not the session's agent), without otherwise, so that a conversation of
// one agent reads as it always did.
func named(msgs []llm.Message, self string, guest bool) []llm.Message {
	if guest || slices.ContainsFunc(msgs, func(m llm.Message) bool { return m.Name != "" && m.Name != self }) {
		return msgs
	}
	if !slices.ContainsFunc(msgs, func(m llm.Message) bool { return m.Name != "" }) {
		return msgs
	}
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Name = ""
	}
	return out
}
