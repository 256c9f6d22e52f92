// The sidebar: the agent New starts a session with, and the sessions,
// newest first, a page at a time, filtered by agent and state. The page
// (app.js) hands it what it needs of the rest in initSidebar.

import * as api from "./api.js";
import { h, shortID, when } from "./dom.js";

const $ = (id) => document.getElementById(id);

const sessionPageSize = 20;
let agents = [];
let nextCursor = null;

// hooks are the page's: onProblem(p) shows a refusal, onStarted(session)
// opens a session New created, currentID() is the open session's id.
let hooks = null;

// initSidebar wires the sidebar's controls and loads it.
export function initSidebar(pageHooks) {
  hooks = pageHooks;
  $("new-session").addEventListener("submit", startSession);
  $("agent-select").addEventListener("change", showAgent);
  $("filter-agent").addEventListener("change", () => loadSessions());
  $("filter-state").addEventListener("change", () => loadSessions());
  $("sessions-refresh").addEventListener("click", () => loadSessions());
  $("sessions-more").addEventListener("click", () => loadSessions(true));
  loadAgents();
  loadSessions();
}

// ---- agents ---------------------------------------------------------------

// The agent New starts is chosen from a list rather than shown as one card
// each, so that the sessions list starts near the top however many agents
// there are. The choice is kept for the tab.
const agentKey = "kerneld.console.agent";

export async function loadAgents() {
  try {
    agents = (await api.listAgents()).data;
  } catch (p) {
    agents = [];
    hooks.onProblem(p);
  }
  const picker = $("agent-select");
  const chosen = picker.value || sessionStorage.getItem(agentKey) || "";
  picker.replaceChildren(...agents.map((a) =>
    h("option", { value: a.name }, a.available ? a.name : `${a.name} (unavailable)`)));
  picker.value = pickAgent(chosen);
  showAgent();
  const select = $("filter-agent");
  const filtered = select.value;
  select.replaceChildren(h("option", { value: "" }, "all"), ...agents.map((a) => h("option", {}, a.name)));
  select.value = filtered;
}

// pickAgent returns chosen if it is an agent, else the first that can run.
function pickAgent(chosen) {
  if (agents.some((a) => a.name === chosen)) return chosen;
  const first = agents.find((a) => a.available) || agents[0];
  return first ? first.name : "";
}

// showAgent says what the chosen agent is, or why it cannot run.
function showAgent() {
  const a = agents.find((x) => x.name === $("agent-select").value);
  $("new-session-start").disabled = !a || !a.available;
  if (!a) {
    $("agent-about").replaceChildren();
    return;
  }
  $("agent-about").replaceChildren(
    h("p", { class: "model" }, [a.model.provider, a.model.name].filter(Boolean).join(" · ")),
    a.description ? h("p", { class: "description" }, a.description) : "",
    a.available ? "" : h("p", { class: "unavailable-reason" }, `Unavailable: ${a.unavailable_reason}`));
}

async function startSession(e) {
  e.preventDefault();
  const agent = $("agent-select").value;
  if (!agent) return;
  sessionStorage.setItem(agentKey, agent);
  $("new-session-start").disabled = true;
  try {
    hooks.onStarted(await api.createSession(agent));
    loadSessions();
  } catch (p) {
    hooks.onProblem(p);
  } finally {
    showAgent();
  }
}

// ---- sessions list --------------------------------------------------------

// loadSessions reloads the first page, or with more, appends the next one.
let sessionsAsked = 0; // only the newest listing is shown: filters may change faster than answers come
export async function loadSessions(more = false) {
  const asked = ++sessionsAsked;
  let page;
  try {
    page = await api.listSessions({ agent: $("filter-agent").value, state: $("filter-state").value,
      cursor: more ? nextCursor : "", limit: sessionPageSize });
  } catch (p) {
    if (asked === sessionsAsked) hooks.onProblem(p);
    return;
  }
  if (asked !== sessionsAsked) return;
  nextCursor = page.next_cursor;
  const items = page.data.map(sessionItem);
  if (more) $("sessions").append(...items);
  else $("sessions").replaceChildren(...items);
  if (!more && items.length === 0) $("sessions").append(h("li", { class: "empty" }, "No sessions yet."));
  $("sessions-more").hidden = !nextCursor;
  markCurrent();
}

function sessionItem(s) {
  return h("li", {},
    h("a", { href: `#/s/${encodeURIComponent(s.id)}`, "data-id": s.id },
      h("span", { class: "title" }, s.name || s.agent),
      h("span", { class: `badge state-${s.state}` }, s.state),
      h("span", { class: "meta" }, `${shortID(s.id)} · ${when(s.created_at)}${s.parent_id ? " · child" : ""}`)));
}

export function markCurrent() {
  const id = hooks.currentID();
  for (const a of $("sessions").querySelectorAll("a[data-id]")) {
    if (a.dataset.id === id) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

let sessionsTimer = 0;
export function loadSessionsSoon() {
  clearTimeout(sessionsTimer);
  sessionsTimer = setTimeout(() => loadSessions(), 300);
}
