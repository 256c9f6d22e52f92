// The console's page: the agents and sessions in the sidebar, one open
// session in the main area. Routes live in the URL's fragment
// (#/s/<session id>), so a reload or a shared link opens the same view and
// no route reaches the server.

import * as api from "./api.js";
import { apply, forget, freshStart, resumePoint, save, snapshotRun } from "./conversation.js";
import { h, shortID } from "./dom.js";
import { changesInbox, initInbox, refreshInbox, renderInbox } from "./inbox.js";
import { initMCP, resetMCP, showMCP } from "./mcp.js";
import { initSchedules, refreshSchedules, resetSchedules } from "./schedules.js";
import { agentNamed, displayTitle, feedLive, initSidebar, loadAgents, loadSessions, rerender, sessionSummary } from "./sidebar.js";
import { follow } from "./stream.js";
import { admitAgent, turnAgents } from "./turns.js";
import { ConversationView, showProblem } from "./view.js";

const $ = (id) => document.getElementById(id);

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

// ---- one session ----------------------------------------------------------

function openSession(id) {
  if (current && current.id === id) return;
  closeSession();
  $("welcome").hidden = true;
  $("inbox").hidden = true;
  document.body.classList.remove("in-inbox");
  $("session").hidden = false;
  document.body.classList.add("in-session");
  $("session-problem").hidden = true;
  $("session-title").textContent = shortID(id);
  $("session-state").textContent = "";
  $("session-queued").textContent = "";
  $("session-parent").replaceChildren();
  // endedRuns are the runs whose end the stream delivered: a session read
  // afterwards that still names one as active was read before its end was
  // recorded (see refreshSession).
  current = { id, session: null, gone: false, endedRuns: new Set(), changed: new Set(), frame: 0, saveTimer: 0, refreshes: 0,
    readSeq: 0, readTimer: 0, parkTimer: 0 };
  current.view = new ConversationView($("conversation"), { onDecide: decide });
  showSettings(false);
  resetMCP();
  resetSchedules(id);
  startReading(resumePoint(id));
  refreshSession();
  rerender(); // the open session shows no unread badge
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
  clearTimeout(current.parkTimer);
  clearTimeout(current.readTimer);
  save(current.id, current.state);
  current = null;
  $("session").hidden = true;
  $("welcome").hidden = false;
  document.body.classList.remove("in-session");
  rerender();
}

function onEvent(s, ev, seq) {
  for (const key of apply(s.state, ev, seq)) s.changed.add(key);
  // Draw once per frame, however many tokens arrived in it; the controls
  // follow what was drawn (a snapshot brings the input Regenerate answers).
  if (!s.frame) {
    s.frame = requestAnimationFrame(() => {
      s.frame = 0;
      s.view.render(s.state, s.changed);
      s.changed = new Set();
      updateBusy();
    });
  }
  if (!s.saveTimer) {
    s.saveTimer = setTimeout(() => { s.saveTimer = 0; save(s.id, s.state); }, 250);
  }
  if (seq > 0) markReadSoon(s, seq);
  parkSoon(s, true);
  if (ev.type === "MESSAGES_SNAPSHOT") snapshotEndedRuns(s, ev);
  if (changesSessionState(ev)) {
    if (ev.type === "RUN_FINISHED" || ev.type === "RUN_ERROR") s.endedRuns.add(kerneldRun(ev));
    updateBusy();
    refreshSession();
    refreshSchedules(); // a firing starts a run, and one that fired once is gone
  }
}

// ---- parking an idle stream ---------------------------------------------------

// A browser opens at most six connections to kerneld over HTTP/1.1, shared
// by all its tabs: a view that held its session's stream open while the
// session is idle would leave a few tabs with none for their requests.
// So once the session is idle and the view has every event of it, the
// stream is parked (its connection closed) while the session feed is
// live; the feed's next word that the session moved on wakes it, and it
// resumes after its last event. parkAfterMs without events comes first,
// so that a run that is about to start does not cost a reconnect.
const parkAfterMs = 1000;

// busy are the feed's statuses of a session whose events are still coming.
const busy = new Set(["running", "waiting_input", "queued", "stalled"]);

// parkSoon parks view s's stream parkAfterMs from now if it may be then;
// restart, for an event of the stream, puts off a park already planned.
function parkSoon(s, restart = false) {
  if (s.parkTimer && !restart) return;
  clearTimeout(s.parkTimer);
  s.parkTimer = setTimeout(() => {
    s.parkTimer = 0;
    if (s === current && !s.stream.parked() && mayPark(s)) s.stream.park();
  }, parkAfterMs);
}

// mayPark reports whether the feed will tell view s when its session moves
// on: the feed is live, lists the session, and has nothing newer of it.
function mayPark(s) {
  return feedLive() && !behind(s) && activeRun() === null;
}

// behind reports whether the feed says view s's session has moved on past
// the view, or does not list it.
function behind(s) {
  const sum = sessionSummary(s.id);
  return sum === null || busy.has(sum.status) || sum.last_seq > s.stream.lastSeq();
}

// wakeIfBehind resumes view s's parked stream when the feed says the
// session moved on; an open stream is parked soon if the feed now says
// the session is idle (it may say so after the stream's last event).
function wakeIfBehind(s) {
  if (!s) return;
  if (!s.stream.parked()) parkSoon(s);
  else if (behind(s)) s.stream.wake();
}

// onFeedStatus follows the feed's status. A feed that reconnects leaves
// parked streams parked: it resumes where it was and tells what changed
// meanwhile, and streams woken all at once could take the connections the
// feed needs. A feed that has ended tells nothing more: the stream reads
// for itself again.
function onFeedStatus(status) {
  if (!current) return;
  if (status === "ended" && current.stream.parked()) current.stream.wake();
  else wakeIfBehind(current);
}

// ---- read cursor ------------------------------------------------------------

// markReadSoon records that this reader has seen session s up to seq
// (PUT /sessions/{id}/read), at most a few times a second: every tab's
// sidebar then drops the session's unread badge, through the feed.
function markReadSoon(s, seq) {
  if (seq <= s.readSeq || s.readTimer || document.hidden) return;
  s.readTimer = setTimeout(async () => {
    s.readTimer = 0;
    const upTo = s.state.lastSeq;
    if (s !== current || upTo <= s.readSeq) return;
    s.readSeq = upTo;
    try {
      await api.markRead(s.id, upTo);
    } catch {
      // a kerneld without read cursors, or a session gone: nothing to mark
    }
  }, 150);
}

// snapshotEndedRuns notes the runs of a snapshot's history as ended and
// reads the session again. A view opened as a run ends can read the
// session while the run goes on and get its stream after the end, as a
// snapshot that holds the run's messages but not its end: without this,
// the header would stay "running" with nothing left to correct it.
function snapshotEndedRuns(s, ev) {
  for (const m of ev.messages || []) {
    const run = m.metadata && m.metadata.kerneld && m.metadata.kerneld.runId;
    if (run && run !== s.state.activeRunId) s.endedRuns.add(run);
  }
  refreshSession();
}

// changesSessionState reports whether ev moves the session to another
// state (running, waiting_input, completed, ...) or queues a run, which
// the header shows.
// The run a snapshot comes in is no run of the session.
function changesSessionState(ev) {
  if (snapshotRun(ev)) return false;
  return ev.type === "RUN_STARTED" || ev.type === "RUN_FINISHED" || ev.type === "RUN_ERROR" ||
    (ev.type === "CUSTOM" && (ev.name.startsWith("kerneld.approval.") || ev.name === "kerneld.run.queued"));
}

// kerneldRun is the run of the session an event belongs to.
const kerneldRun = (ev) => (ev.metadata && ev.metadata.kerneld && ev.metadata.kerneld.runId) || ev.runId;

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
  if (status === "parked" || status === "live") {
    // A parked stream is as live as the feed that wakes it.
    if (current) parkSoon(current);
    p = status === "parked" ? { title: "live", detail: "followed through the session feed until it changes" } : p;
    status = "live";
  }
  const el = $("stream-status");
  el.textContent = statusText[status] || status;
  el.className = `stream-status status-${status}`;
  el.title = p ? `${p.title}: ${p.detail}` : "";
  if (status === "ended") refreshSession(); // closed, or deleted: the controls say so
}

async function refreshSession() {
  const s = current;
  if (!s) return;
  // Only the newest answer counts: an older one arriving late would show
  // a state the session has left.
  const asked = s.refreshes = (s.refreshes || 0) + 1;
  let session;
  try {
    session = await api.getSession(s.id);
  } catch (p) {
    if (s !== current || asked !== s.refreshes) return;
    s.gone = p.status === 404; // deleted, or a link to a session that never was
    showProblem($("session-problem"), p);
    updateBusy();
    return;
  }
  if (s !== current || asked !== s.refreshes) return;
  if (stale(s, session)) return;
  s.session = session;
  const title = displayTitle(session);
  $("session-title").textContent = title;
  $("session-title").title = session.id;
  document.title = `${title} · kerneld`;
  const badge = $("session-state");
  badge.textContent = session.state;
  badge.className = `badge state-${session.state}`;
  const queued = session.queued_runs || 0; // a kerneld that counts them
  $("session-queued").textContent = queued ? `${queued} queued` : "";
  fillSettings(session);
  showMCP(session);
  if (session.last_seq > s.readSeq) markReadSoon(s, session.last_seq);
  $("session-parent").replaceChildren(
    session.parent_id ? h("a", { href: `#/s/${encodeURIComponent(session.parent_id)}` }, "parent session") : "",
    session.forked_from ? h("a", { href: `#/s/${encodeURIComponent(session.forked_from.session_id)}` }, "forked from") : "");
  updateBusy();
}

// stale reports whether session, as read for view s, still names as active
// a run whose end s's stream delivered. kerneld logs a run's end before it
// records it, so a read in between says the run is still going; the
// header would stay "running" with nothing left to correct it. Such a
// read is dropped and the session read again shortly, until it catches
// up (a store that cannot record the end keeps it running: then the
// header says so, after a while).
function stale(s, session) {
  if (!session.active_run_id || !s.endedRuns.has(session.active_run_id)) {
    s.staleReads = 0;
    return false;
  }
  s.staleReads = (s.staleReads || 0) + 1;
  if (s.staleReads > 12) return false;
  setTimeout(() => { if (s === current) refreshSession(); }, Math.min(50 * 2 ** s.staleReads, 2000));
  return true;
}

// activeRun is the run the session is running, from its events or, before
// they arrive, from the session itself.
function activeRun() {
  if (!current) return null;
  if (current.state.activeRunId) return current.state.activeRunId;
  const s = current.session;
  const running = s && (s.state === "running" || s.state === "waiting_input") && !current.endedRuns.has(s.active_run_id);
  return running ? s.active_run_id : null;
}

// The message box's invitation, as the page has it.
const inputPlaceholder = $("input").placeholder;

// updateAgents offers the agents that may take a turn on the session, when
// there are some, to answer the next input (see turns.js).
function updateAgents() {
  const s = current && current.session;
  const others = turnAgents(s);
  const select = $("run-agent");
  $("agent-choice").hidden = others.length === 0;
  const names = others.length ? [s.agent, ...others] : [];
  if (select.dataset.names === names.join(",")) return;
  select.dataset.names = names.join(",");
  select.replaceChildren(...names.map((n) => new Option(n, n === s.agent ? "" : n)));
}

function updateBusy() {
  updateAgents();
  const busy = activeRun() !== null;
  $("busy-choice").hidden = !busy;
  $("cancel-run").hidden = !busy;
  // Screen readers announce the answer once it is complete, not per token.
  $("conversation").setAttribute("aria-busy", String(busy));
  const gone = Boolean(current && current.gone);
  const closed = Boolean(current && current.session && current.session.state === "closed");
  $("input").disabled = $("send").disabled = $("close-session").disabled = closed || gone;
  $("fork").disabled = gone;
  $("regenerate").hidden = busy || gone || !current || !current.state.lastRunId;
  $("input").placeholder = gone ? "This session is not there: it was deleted, or never existed."
    : closed ? "This session is closed." : inputPlaceholder;
}

// idempotencyKey names one click of Send, so a retried request cannot
// start the run twice.
function idempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID(); // secure contexts only
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

// withImages returns the input for text and the image files chosen: the
// text alone, or AG-UI content parts with each image's bytes in base64.
async function withImages(text, files) {
  if (!files || files.length === 0) return text;
  const parts = [{ type: "text", text }];
  for (const file of files) {
    const url = await new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
    parts.push({ type: "image", source: { type: "data", value: url.slice(url.indexOf(",") + 1), mimeType: file.type } });
  }
  return parts;
}

async function send(e) {
  e.preventDefault();
  const input = $("input");
  const text = input.value.trim();
  if (!current || !text) return;
  const ifBusy = activeRun() ? $("if-busy").value : null;
  const s = current;
  $("send").disabled = true;
  try {
    const agent = $("run-agent").value || null;
    if (s.session) await admitAgent(s.session, agent);
    await api.sendInput(s.id, await withImages(text, $("attach").files), ifBusy, idempotencyKey(), agent);
    s.stream.wake(); // the run's events follow at once, not when the feed tells
    input.value = "";
    $("attach").value = "";
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
  } catch (p) {
    showProblem($("session-problem"), p);
  } finally {
    button.disabled = false;
    updateBusy();
  }
}

function decide(item, decision, reason, sameArguments) {
  return api.decideApproval(current.id, item.runId, item.toolCallId, decision, reason, sameArguments);
}

// ---- settings: title, permission mode, instructions, clear -------------------

function showSettings(open) {
  $("settings").hidden = !open;
  $("settings-toggle").setAttribute("aria-expanded", String(open));
  $("settings-status").textContent = "";
}

// fillSettings shows session's settings, unless the person is editing them.
function fillSettings(session) {
  const form = $("settings");
  if (!form.hidden && form.contains(document.activeElement)) return;
  $("title-input").value = session.title || "";
  const agent = agentNamed(session.agent);
  const modes = [...((agent && agent.permission_modes) || [session.permission_mode || "ask"])];
  if (!modes.includes(session.permission_mode)) modes.push(session.permission_mode);
  $("permission-mode").replaceChildren(...modes.map((m) => h("option", { value: m }, modeText[m] || m)));
  $("permission-mode").value = session.permission_mode || "ask";
  $("permission-mode").disabled = modes.length < 2;
  const hasInstructions = "instructions" in session;
  $("instructions-field").hidden = !hasInstructions;
  if (hasInstructions) $("instructions-input").value = session.instructions || "";
  // A closed session takes no runs, a clear's included.
  $("clear-session").hidden = session.state === "closed";
}

const modeText = {
  ask: "ask every time",
  read_only_auto: "run read-only tools without asking",
  auto: "run every tool without asking",
};

// saveSettings patches what changed in the settings form.
async function saveSettings(e) {
  e.preventDefault();
  const s = current && current.session;
  if (!s) return;
  const patch = {};
  const title = $("title-input").value.trim();
  if (title !== (s.title || "")) patch.title = title;
  if ($("permission-mode").value !== s.permission_mode) patch.permission_mode = $("permission-mode").value;
  if (!$("instructions-field").hidden && $("instructions-input").value !== (s.instructions || "")) patch.instructions = $("instructions-input").value;
  if (Object.keys(patch).length === 0) {
    $("settings-status").textContent = "Nothing changed.";
    return;
  }
  $("settings-save").disabled = true;
  try {
    await api.updateSession(s.id, patch);
    $("session-problem").hidden = true;
    $("settings-status").textContent = "Saved.";
    refreshSession();
  } catch (p) {
    showProblem($("session-problem"), p);
    $("settings-status").textContent = "";
  } finally {
    $("settings-save").disabled = false;
  }
}

// clearConversation empties the session's history in place. The view
// resets when its stream brings kerneld.session.cleared, as every other
// tab's does (a parked stream is woken by the feed): nothing is reloaded.
function clearConversation() {
  if (!confirm("Clear this conversation? Its messages go; the session, its settings and its memory stay.")) return;
  const s = current;
  control($("clear-session"), async () => {
    await api.clearSession(s.id);
    s.stream.wake(); // the clear's events follow at once, not when the feed tells
    return null;
  });
}

// ---- routing and wiring ---------------------------------------------------

function route() {
  if (location.hash === "#/inbox") $("inbox-link").setAttribute("aria-current", "page");
  else $("inbox-link").removeAttribute("aria-current");
  const m = location.hash.match(/^#\/s\/(.+)$/);
  if (m) openSession(decodeURIComponent(m[1]));
  else if (location.hash === "#/inbox") openInbox();
  else {
    closeSession();
    $("inbox").hidden = true;
    $("welcome").hidden = false;
    document.body.classList.remove("in-session", "in-inbox");
    document.title = "kerneld console";
  }
}

// openInbox shows the approvals waiting across sessions.
function openInbox() {
  closeSession();
  $("welcome").hidden = true;
  $("inbox").hidden = false;
  document.body.classList.add("in-session", "in-inbox");
  document.title = "Inbox · kerneld";
  renderInbox();
  refreshInbox();
}

// onFeedChange hears the session feed (after the sidebar drew it): the
// inbox follows approvals, and the open session's header its title.
// A change of the session's status refreshes the header too: kerneld
// records a run's end after its stream says so, and the feed says when
// it has (a read in between would leave the header "running").
function onFeedChange(ev) {
  if (changesInbox(ev)) refreshInbox();
  if (ev && current && ev.session.id === current.id &&
      ["session.titled", "session.updated", "session.cleared", "session.closed", "session.deleted", "session.status", "run.ended"].includes(ev.type)) {
    refreshSession();
  }
  if (current) wakeIfBehind(current);
}

function wire() {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    useKey($("key-input").value.trim());
  });
  $("key-clear").addEventListener("click", () => useKey(""));
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
    () => api.regenerate(current.id, current.state.lastRunId, idempotencyKey())));
  $("close-session").addEventListener("click", () => {
    if (confirm("Close this session? It stays readable, but takes no more input.")) {
      control($("close-session"), () => api.closeSession(current.id));
    }
  });
  $("settings-toggle").addEventListener("click", () => showSettings($("settings").hidden));
  $("settings").addEventListener("submit", saveSettings);
  $("clear-session").addEventListener("click", clearConversation);
  initMCP(() => refreshSession());
  initSchedules();
  window.addEventListener("hashchange", route);
  // Keep what is rendered when the tab goes away, so a reload resumes it.
  window.addEventListener("pagehide", () => current && save(current.id, current.state));
}

// openStarted opens a session New created, and puts the focus in its
// message box.
function openStarted(session) {
  clearGlobalProblem();
  location.hash = `#/s/${encodeURIComponent(session.id)}`;
  route(); // now, not at hashchange, so that the message box can take the focus
  $("input").focus();
}

wire();
showKeyState();
initInbox((id, agent) => {
  const s = sessionSummary(id);
  return s ? displayTitle(s) : agent;
});
initSidebar({
  onProblem: showGlobalProblem, onStarted: openStarted, currentID: () => current && current.id,
  onChange: onFeedChange, onAgents: () => current && current.session && fillSettings(current.session),
  onFeedStatus,
});
route();
