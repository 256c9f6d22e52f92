// Which agents may answer a session's next input: its own, or another
// that takes a turn on the same conversation (agent on POST
// /sessions/{id}/run). kerneld wants three parties to agree: the session
// lists the other agent in its agents, and each agent's file names the
// other in peers. The console offers the agents the session lists and
// every agent that is a peer of the session's agent both ways, and adds
// the one picked to the session's agents before its first turn, so a
// conversation can be handed over from the console alone.

import * as api from "./api.js";
import { agentNamed } from "./sidebar.js";

// turnAgents returns the agents other than its own that may answer the
// next input of session.
export function turnAgents(session) {
  if (!session) return [];
  const names = new Set(session.agents || []);
  const own = agentNamed(session.agent);
  for (const peer of (own && own.peers) || []) {
    const other = agentNamed(peer);
    if (other && (other.peers || []).includes(session.agent)) names.add(peer);
  }
  names.delete(session.agent);
  return [...names];
}

// admitAgent lets agent take turns on session, if the session does not
// list it yet (PATCH /sessions/{id} {agents}); it throws the Problem of a
// refusal. No agent, or the session's own, needs nothing.
export async function admitAgent(session, agent) {
  if (!agent || agent === session.agent || (session.agents || []).includes(agent)) return;
  const updated = await api.updateSession(session.id, { agents: [...(session.agents || []), agent] });
  session.agents = updated.agents;
}
