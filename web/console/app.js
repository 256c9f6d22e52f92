// The console's page: the agents and sessions in the sidebar, one open
// session in the main area. Routes live in the URL's fragment
// (#/s/<session id>), so a reload or a shared link opens the same view and
// no route reaches the server.

import * as api from "./api.js";
import { apply, forget, freshStart, resumePoint, save } from "./conversation.js";
import { h, shortID, when } from "./dom.js";
import { follow } from "./stream.js";
import { ConversationView, showProblem } from "./view.js";

const $ = (id) => document.getElementById(id);

const sessionPageSize = 20;
let agents = [];
let nextCursor = null;
let current = null; // the open session: see openSession

// ---- problems -------------------------------------------------------------

function showGlobalProblem(p) {
  showProblem($("global-problem"), p);
  if (p.status === 401) $("key-input").focus();
}

function clearGlobalProblem() {
  $("global-problem").hidden = true;
}

// ---- API key --------------------------------------------------------------

function showKeyState() {
  const set = api.apiKey() !== "";
  $("key-input").placeholder = set ? "set for this tab" : "none: open kerneld";
  $("key-clear").hidden = !set;
}

function useKey(key) {
  api.setAPIKey(key);
  $("key-input").value = "";
  showKeyState();
  clearGlobalProblem();
  loadAgents();
  loadSessions();
  if (current) {
    const id = current.id;
    closeSession();
    openSession(id); // its stream starts again with the new key
  }
}

// ---- agents ---------------------------------------------------------------

async function loadAgents() {
  try {
    agents = (await api.listAgents()).data;
  } catch (p) {
    agents = [];
    showGlobalProblem(p);
  }
  $("agents").replaceChildren(...agents.map(agentItem));
  const select = $("filter-agent");
  const chosen = select.value;
  select.replaceChildren(h("option", { value: "" }, "all"), ...agents.map((a) => h("option", {}, a.name)));
  select.value = chosen;
}

function agentItem(a) {
  const start = h("button", { type: "button", class: "primary", disabled: !a.available, "data-agent": a.name,
    "aria-label": `New session with ${a.name}` }, "New");
  start.addEventListener("click", () => startSession(a.name, start));
  return h("li", { class: `agent${a.available ? "" : " unavailable"}` },
    h("div", { class: "agent-head" }, h("strong", {}, a.name),
      h("span", { class: "model" }, [a.model.provider, a.model.name].filter(Boolean).join(" · ")), start),
    a.description ? h("p", { class: "description", title: a.description }, a.description) : "",
    a.available ? "" : h("p", { class: "unavailable-reason" }, `Unavailable: ${a.unavailable_reason}`));
}

async function startSession(agent, button) {
  button.disabled = true;
  try {
    const s = await api.createSession(agent);
    clearGlobalProblem();
    location.hash = `#/s/${encodeURIComponent(s.id)}`;
    route(); // now, not at hashchange, so that the message box can take the focus
    $("input").focus();
    loadSessions();
  } catch (p) {
    showGlobalProblem(p);
  } finally {
    button.disabled = false;
  }
}

// ---- sessions list --------------------------------------------------------

// loadSessions reloads the first page, or with more, appends the next one.
let sessionsAsked = 0; // only the newest listing is shown: filters may change faster than answers come
async function loadSessions(more = false) {
  const asked = ++sessionsAsked;
  let page;
  try {
    page = await api.listSessions({ agent: $("filter-agent").value, state: $("filter-state").value,
      cursor: more ? nextCursor : "", limit: sessionPageSize });
  } catch (p) {
    if (asked === sessionsAsked) showGlobalProblem(p);
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

function markCurrent() {
  for (const a of $("sessions").querySelectorAll("a[data-id]")) {
    if (current && a.dataset.id === current.id) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

let sessionsTimer = 0;
function loadSessionsSoon() {
  clearTimeout(sessionsTimer);
  sessionsTimer = setTimeout(() => loadSessions(), 300);
}

// ---- one session ----------------------------------------------------------

function openSession(id) {
  if (current && current.id === id) return;
  closeSession();
  $("welcome").hidden = true;
  $("session").hidden = false;
  document.body.classList.add("in-session");
  $("session-problem").hidden = true;
  $("session-title").textContent = shortID(id);
  $("session-state").textContent = "";
  $("session-parent").replaceChildren();
  current = { id, session: null, changed: new Set(), frame: 0, saveTimer: 0, refreshes: 0 };
  current.view = new ConversationView($("conversation"), { onDecide: decide });
  startReading(resumePoint(id));
  refreshSession();
  markCurrent();
}

// startReading shows state and follows the stream from query on.
function startReading({ state, query }) {
  const s = current;
  s.state = state;
  s.view.reset();
  s.view.render(state, new Set());
  updateBusy();
  s.stream = follow(s.id, query, {
    onEvent: (ev, seq) => onEvent(s, ev, seq),
    onStatus: (status, p) => setStreamStatus(status, p),
    onProblem: (p) => onStreamProblem(s, p),
  });
}

function closeSession() {
  if (!current) return;
  current.stream.close();
  cancelAnimationFrame(current.frame);
  clearTimeout(current.saveTimer);
  save(current.id, current.state);
  current = null;
  $("session").hidden = true;
  $("welcome").hidden = false;
  document.body.classList.remove("in-session");
  markCurrent();
}

function onEvent(s, ev, seq) {
  for (const key of apply(s.state, ev, seq)) s.changed.add(key);
  // Draw once per frame, however many tokens arrived in it.
  if (!s.frame) {
    s.frame = requestAnimationFrame(() => {
      s.frame = 0;
      s.view.render(s.state, s.changed);
      s.changed = new Set();
    });
  }
  if (!s.saveTimer) {
    s.saveTimer = setTimeout(() => { s.saveTimer = 0; save(s.id, s.state); }, 250);
  }
  if (changesSessionState(ev)) {
    updateBusy();
    refreshSession();
    loadSessionsSoon();
  }
}

// changesSessionState reports whether ev moves the session to another
// state (running, waiting_input, completed, ...), which the header shows.
function changesSessionState(ev) {
  return ev.type === "RUN_STARTED" || ev.type === "RUN_FINISHED" || ev.type === "RUN_ERROR" ||
    (ev.type === "CUSTOM" && ev.name.startsWith("kerneld.approval."));
}

function onStreamProblem(s, p) {
  if (p.code === "cursor_ahead" && s === current) {
    // The saved conversation is ahead of the server's log (the session was
    // deleted and made again, or the store was reset): start over.
    s.stream.close();
    forget(s.id);
    startReading(freshStart());
    return;
  }
  setStreamStatus("ended");
  showProblem($("session-problem"), p);
}

const statusText = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", ended: "ended" };

function setStreamStatus(status, p) {
  const el = $("stream-status");
  el.textContent = statusText[status] || status;
  el.className = `stream-status status-${status}`;
  el.title = p ? `${p.title}: ${p.detail}` : "";
}

async function refreshSession() {
  const s = current;
  if (!s) return;
  // Only the newest answer counts: an older one arriving late would show
  // a state the session has left.
  const asked = s.refreshes = (s.refreshes || 0) + 1;
  try {
    const session = await api.getSession(s.id);
    if (s !== current || asked !== s.refreshes) return;
    s.session = session;
    $("session-title").textContent = session.name || session.agent;
    $("session-title").title = session.id;
    document.title = `${session.name || session.agent} · kerneld`;
    const badge = $("session-state");
    badge.textContent = session.state;
    badge.className = `badge state-${session.state}`;
    $("session-parent").replaceChildren(
      session.parent_id ? h("a", { href: `#/s/${encodeURIComponent(session.parent_id)}` }, "parent session") : "",
      session.forked_from ? h("a", { href: `#/s/${encodeURIComponent(session.forked_from.session_id)}` }, "forked from") : "");
    updateBusy();
    refreshIfBehind(s, session);
  } catch (p) {
    if (s === current && asked === s.refreshes) showProblem($("session-problem"), p);
  }
}

// refreshIfBehind reads the session again, a little later, while its
// record still names as running the run whose end the stream has shown:
// a run's end is logged, and streamed, just before it is recorded.
function refreshIfBehind(s, session) {
  const behind = !s.state.activeRunId && session.active_run_id && session.active_run_id === s.state.lastRunId;
  if (!behind && s.behind > 0) loadSessionsSoon(); // the list read the record as late
  s.behind = behind ? (s.behind || 0) + 1 : 0;
  if (behind && s.behind <= 20) {
    setTimeout(() => { if (s === current) refreshSession(); }, 100 * s.behind);
  }
}

// activeRun is the run the session is running, from its events or, before
// they arrive, from the session itself.
function activeRun() {
  if (!current) return null;
  if (current.state.activeRunId) return current.state.activeRunId;
  const s = current.session;
  return s && (s.state === "running" || s.state === "waiting_input") ? s.active_run_id : null;
}

function updateBusy() {
  const busy = activeRun() !== null;
  $("busy-choice").hidden = !busy;
  $("cancel-run").hidden = !busy;
  // Screen readers announce the answer once it is complete, not per token.
  $("conversation").setAttribute("aria-busy", String(busy));
  const closed = current && current.session && current.session.state === "closed";
  $("input").disabled = $("send").disabled = $("close-session").disabled = Boolean(closed);
  $("regenerate").hidden = busy || !current || !current.state.lastRunId;
  if (closed) $("input").placeholder = "This session is closed.";
}

// idempotencyKey names one click of Send, so a retried request cannot
// start the run twice.
function idempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID(); // secure contexts only
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function send(e) {
  e.preventDefault();
  const input = $("input");
  const text = input.value.trim();
  if (!current || !text) return;
  const ifBusy = activeRun() ? $("if-busy").value : null;
  $("send").disabled = true;
  try {
    await api.sendInput(current.id, text, ifBusy, idempotencyKey());
    input.value = "";
    $("session-problem").hidden = true;
  } catch (p) {
    showProblem($("session-problem"), p);
  } finally {
    $("send").disabled = false;
    input.focus();
  }
}

async function cancelRun() {
  const runID = activeRun();
  if (!runID) return;
  $("cancel-run").disabled = true;
  try {
    await api.cancelRun(current.id, runID);
    $("session-problem").hidden = true;
  } catch (p) {
    showProblem($("session-problem"), p);
  } finally {
    $("cancel-run").disabled = false;
  }
}

// control runs one of the session's controls from button: it shows a
// refusal's problem, and opens the session the control answers with.
async function control(button, action) {
  button.disabled = true;
  try {
    const session = await action();
    $("session-problem").hidden = true;
    if (session && session.id !== current.id) location.hash = `#/s/${encodeURIComponent(session.id)}`;
    else refreshSession();
    loadSessionsSoon();
  } catch (p) {
    showProblem($("session-problem"), p);
  } finally {
    button.disabled = false;
    updateBusy();
  }
}

function decide(item, decision, reason) {
  return api.decideApproval(current.id, item.runId, item.toolCallId, decision, reason);
}

// ---- routing and wiring ---------------------------------------------------

function route() {
  const m = location.hash.match(/^#\/s\/(.+)$/);
  if (m) openSession(decodeURIComponent(m[1]));
  else {
    closeSession();
    document.title = "kerneld console";
  }
}

function wire() {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    useKey($("key-input").value.trim());
  });
  $("key-clear").addEventListener("click", () => useKey(""));
  $("filter-agent").addEventListener("change", () => loadSessions());
  $("filter-state").addEventListener("change", () => loadSessions());
  $("sessions-refresh").addEventListener("click", () => loadSessions());
  $("sessions-more").addEventListener("click", () => loadSessions(true));
  $("composer").addEventListener("submit", send);
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("cancel-run").addEventListener("click", cancelRun);
  $("fork").addEventListener("click", () => control($("fork"), () => api.forkSession(current.id)));
  $("regenerate").addEventListener("click", () => control($("regenerate"),
    async () => (await api.regenerateRun(current.id, current.state.lastRunId)).session));
  $("close-session").addEventListener("click", () => {
    if (confirm("Close this session? It stays readable, but takes no more input.")) {
      control($("close-session"), () => api.closeSession(current.id));
    }
  });
  window.addEventListener("hashchange", route);
  // Keep what is rendered when the tab goes away, so a reload resumes it.
  window.addEventListener("pagehide", () => current && save(current.id, current.state));
}

wire();
showKeyState();
loadAgents();
loadSessions();
route();
