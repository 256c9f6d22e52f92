// The sidebar: the agent New starts a session with, and the sessions,
// most recently active first, kept current by the tenant's session feed
// (feed.js): a run started anywhere (another tab, curl, a schedule)
// moves its session to the top with its status, title, unread count and
// waiting approvals, with no polling. The page (app.js) hands it what it
// needs of the rest in initSidebar.

import * as api from "./api.js";
import { followFeed } from "./feed.js";
import { h, shortID, when } from "./dom.js";

const $ = (id) => document.getElementById(id);

const sessionPageSize = 50; // the feed's snapshot is the first page of GET /sessions
let agents = [];
let sessions = new Map(); // id → the session's summary, as the feed last told it
let feed = null;
let feedWorks = true; // false when this kerneld keeps no feed: then the list is read on demand
let olderCursor = null; // the next page of GET /sessions, once Older sessions was asked for
let olderAsked = 0;

// hooks are the page's: onProblem(p) shows a refusal, onStarted(session)
// opens a session New created, currentID() is the open session's id,
// onChange(ev) hears each change the feed reports, after the sidebar;
// onFeedStatus(status) hears whether the feed is live.
let hooks = null;
let feedStatus = "connecting";

// initSidebar wires the sidebar's controls and loads it.
export function initSidebar(pageHooks) {
  hooks = pageHooks;
  $("new-session").addEventListener("submit", startSession);
  $("agent-select").addEventListener("change", showAgent);
  $("filter-agent").addEventListener("change", () => loadSessions());
  $("filter-state").addEventListener("change", renderSessions);
  $("sessions-refresh").addEventListener("click", () => loadSessions());
  $("sessions-more").addEventListener("click", loadOlder);
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
  hooks.onAgents();
}

// agentNamed returns the agent called name, as GET /agents lists it.
export const agentNamed = (name) => agents.find((a) => a.name === name) || null;

// pickAgent returns chosen if it is an agent, else the first that can run.
function pickAgent(chosen) {
  if (agents.some((a) => a.name === chosen)) return chosen;
  const first = agents.find((a) => a.available) || agents[0];
  return first ? first.name : "";
}

// showAgent says what the chosen agent is, or why it cannot run.
function showAgent() {
  const a = agentNamed($("agent-select").value);
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
    const session = await api.createSession(agent);
    remember(summaryOf(session), true); // at once: the feed's word follows
    renderSessions();
    hooks.onStarted(session);
  } catch (p) {
    hooks.onProblem(p);
  } finally {
    showAgent();
  }
}

// ---- sessions list --------------------------------------------------------

// loadSessions (re)starts the feed for the agent filter: it begins with a
// snapshot of the first page. A kerneld without a feed is read once.
export function loadSessions() {
  if (feed) feed.close();
  feed = null;
  sessions = new Map();
  olderCursor = null;
  olderAsked++;
  if (!feedWorks) {
    readPage();
    return;
  }
  feed = followFeed($("filter-agent").value, {
    onSnapshot(list) {
      sessions = new Map();
      for (const s of list) remember(s);
      $("sessions-more").hidden = list.length < sessionPageSize;
      olderCursor = null;
      renderSessions();
      hooks.onChange(null);
    },
    onChange(ev) {
      if (ev.type === "session.deleted") sessions.delete(ev.session.id);
      else remember(ev.session);
      renderSessions();
      hooks.onChange(ev);
    },
    onStatus: setFeedStatus,
    onProblem(p) {
      setFeedStatus("ended", p);
      if (p.code === "feed_unavailable") {
        feedWorks = false;
        $("sessions-refresh").hidden = false;
        readPage();
        return;
      }
      hooks.onProblem(p);
    },
  });
}

// readPage lists the first page without the feed (a kerneld that keeps
// none): the Refresh button reads it again.
async function readPage() {
  const asked = olderAsked;
  try {
    const page = await api.listSessions({ agent: $("filter-agent").value, limit: sessionPageSize });
    if (asked !== olderAsked) return;
    sessions = new Map();
    for (const s of page.data) remember(summaryOf(s));
    olderCursor = page.next_cursor;
    $("sessions-more").hidden = !olderCursor;
    renderSessions();
    hooks.onChange(null);
  } catch (p) {
    hooks.onProblem(p);
  }
}

// loadOlder adds the next page of sessions, older than the feed's first
// page; the feed keeps them current from then on.
async function loadOlder() {
  const asked = olderAsked;
  const filters = { agent: $("filter-agent").value, limit: sessionPageSize };
  try {
    if (!olderCursor) olderCursor = (await api.listSessions(filters)).next_cursor; // where the first page ends
    if (!olderCursor) {
      $("sessions-more").hidden = true;
      return;
    }
    const page = await api.listSessions({ ...filters, cursor: olderCursor });
    if (asked !== olderAsked) return;
    for (const s of page.data) remember(summaryOf(s), true);
    olderCursor = page.next_cursor;
    $("sessions-more").hidden = !olderCursor;
    renderSessions();
  } catch (p) {
    hooks.onProblem(p);
  }
}

// summaryOf is a session read from the API as the feed would sum it up.
function summaryOf(s) {
  return { id: s.id, agent: s.agent, title: s.title ?? null, name: s.name ?? null, metadata: s.metadata || {},
    status: s.status || "idle", updated_at: s.updated_at, last_seq: s.last_seq || 0,
    pending_approvals: 0, unread: s.unread ?? 0 };
}

// remember keeps s. A session read from the API (fromAPI) never replaces
// what the feed said of it: the feed's word is the newer.
function remember(s, fromAPI = false) {
  if (fromAPI && sessions.has(s.id)) return;
  sessions.set(s.id, s);
}

// sessionSummary is what the sidebar knows of session id, or null.
export const sessionSummary = (id) => sessions.get(id) || null;

// displayTitle is what names a session in a list: its title, its name,
// or its agent.
export const displayTitle = (s) => s.title || s.name || s.agent;

function renderSessions() {
  const status = $("filter-state").value;
  const shown = [...sessions.values()]
    .filter((s) => !status || s.status === status)
    .sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
  const items = shown.map(sessionItem);
  if (items.length === 0) items.push(h("li", { class: "empty" }, sessions.size ? "No session matches." : "No sessions yet."));
  $("sessions").replaceChildren(...items);
  markCurrent();
}

function sessionItem(s) {
  const current = s.id === hooks.currentID();
  const unread = current ? 0 : s.unread || 0; // the open session is being read
  const pending = s.pending_approvals || 0;
  return h("li", {},
    h("a", { href: `#/s/${encodeURIComponent(s.id)}`, "data-id": s.id, title: s.id, class: unread ? "has-unread" : null },
      h("span", { class: "title" }, displayTitle(s)),
      unread ? h("span", { class: "badge unread-badge", title: `${unread} unread` }, String(unread)) : h("span"),
      h("span", { class: "sub" },
        h("span", { class: `badge state-${s.status}` }, s.status),
        pending ? h("span", { class: "badge pending-badge", title: `${pending} waiting for your approval` }, `${pending} to approve`) : "",
        h("span", { class: "meta" }, `${s.agent} · ${shortID(s.id)} · ${when(s.updated_at)}`))));
}

export function markCurrent() {
  const id = hooks.currentID();
  for (const a of $("sessions").querySelectorAll("a[data-id]")) {
    if (a.dataset.id === id) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// rerender draws the list again (the open session changed: its unread
// badge is not shown).
export const rerender = renderSessions;

const feedStatusText = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", ended: "not live" };

// feedLive reports whether the feed is live: every change to a listed
// session reaches the page as it happens.
export const feedLive = () => feedWorks && feedStatus === "live";

function setFeedStatus(status, p) {
  feedStatus = status;
  if (hooks.onFeedStatus) hooks.onFeedStatus(status);
  const el = $("feed-status");
  el.textContent = feedStatusText[status] || status;
  el.className = `feed-status status-${status}`;
  el.title = p ? `${p.title}: ${p.detail}` : "the list follows kerneld's session feed";
}
