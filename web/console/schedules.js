// The open session's schedules: inputs kerneld posts to the session
// itself, once at a time, every interval, or at a time and then every
// interval (POST /sessions/{id}/schedules), each listed with when it
// fires next and how its last firing went, and cancellable (DELETE). The
// list is read when the panel opens, after each change, when a run of the
// session starts or ends (a firing starts one), and just after the next
// firing is due (a firing that skips a busy session starts none).

import * as api from "./api.js";
import { h, when } from "./dom.js";
import { showProblem } from "./view.js";

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

let sessionID = null; // the open session's id
let timer = 0; // reads the list again once the next firing is due
let reads = 0; // only the newest read is drawn

const listSchedules = (id) => api.request("GET", `/sessions/${enc(id)}/schedules`);
const createSchedule = (id, body) => api.request("POST", `/sessions/${enc(id)}/schedules`, body);
const deleteSchedule = (id, sid) => api.request("DELETE", `/sessions/${enc(id)}/schedules/${enc(sid)}`);

// initSchedules wires the panel.
export function initSchedules() {
  $("schedules-toggle").addEventListener("click", () => openSchedules($("schedules").hidden));
  $("schedule-form").addEventListener("submit", create);
  $("schedule-now").addEventListener("click", () => { $("schedule-at").value = localInput(new Date()); });
}

// openSchedules shows the panel, reading the list, or hides it.
export function openSchedules(open) {
  $("schedules").hidden = !open;
  $("schedules-toggle").setAttribute("aria-expanded", String(open));
  clearTimeout(timer);
  if (open) {
    $("schedules-problem").hidden = true;
    refreshSchedules();
  }
}

// resetSchedules shows the schedules of session id from now on, the
// panel closed.
export function resetSchedules(id) {
  sessionID = id;
  reads++;
  openSchedules(false);
  $("schedule-list").replaceChildren();
}

// refreshSchedules reads the list again, if the panel is open.
export async function refreshSchedules() {
  if (!sessionID || $("schedules").hidden) return;
  const id = sessionID;
  const read = ++reads;
  let list;
  try {
    list = (await listSchedules(id)).data;
  } catch (p) {
    if (read === reads) showProblem($("schedules-problem"), p);
    return;
  }
  if (read !== reads || id !== sessionID) return;
  draw(list);
  readWhenDue(list);
}

function draw(list) {
  $("schedule-list").replaceChildren(...(list.length
    ? list.map(scheduleItem)
    : [h("li", { class: "empty" }, "Nothing scheduled.")]));
}

// readWhenDue reads the list again a moment after the next firing is due.
function readWhenDue(list) {
  clearTimeout(timer);
  const next = Math.min(...list.map((s) => Date.parse(s.next_at)));
  if (!Number.isFinite(next)) return;
  const wait = Math.max(next - Date.now(), 0) + 1500;
  if (wait < 2 ** 31) timer = setTimeout(refreshSchedules, wait);
}

// scheduleItem is one schedule: its input, when it fires, what it does
// when the session is busy, how its last firing went, and Cancel.
function scheduleItem(s) {
  const cancel = h("button", { type: "button", class: "quiet cancel-schedule", "aria-label": `Cancel the schedule “${s.input}”` }, "Cancel");
  cancel.addEventListener("click", () => remove(s.id, cancel));
  const last = s.last_firing;
  return h("li", { class: "schedule", "data-id": s.id },
    h("div", { class: "line" }, h("span", { class: "input" }, s.input), cancel),
    h("div", { class: "meta" },
      `${cadence(s)} · next ${when(s.next_at)} · ${s.if_busy === "queue" ? "queued" : "skipped"} while a run is active · fired ${s.fired} time${s.fired === 1 ? "" : "s"}`),
    last ? h("div", { class: `meta firing firing-${last.outcome}` },
      `Last firing ${when(last.at)}: ${last.outcome}${last.error ? ` (${last.error})` : ""}`) : "");
}

// cadence says when a schedule fires, in words.
function cadence(s) {
  if (s.every && s.at) return `every ${s.every} from ${when(s.at)}`;
  if (s.every) return `every ${s.every}`;
  return `once, at ${when(s.at)}`;
}

// localInput writes d as a datetime-local value, in this browser's zone.
function localInput(d) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// fromForm is the schedule the form describes: at is read in this
// browser's time zone and sent in UTC; a field left empty is not sent.
function fromForm() {
  const body = { input: $("schedule-input").value.trim(), if_busy: $("schedule-if-busy").value };
  const at = $("schedule-at").value;
  if (at) body.at = new Date(at).toISOString().replace(/\.\d{3}Z$/, "Z");
  const every = $("schedule-every").value.trim();
  if (every) body.every = every;
  return body;
}

async function create(e) {
  e.preventDefault();
  if (!sessionID) return;
  $("schedule-add").disabled = true;
  try {
    await createSchedule(sessionID, fromForm());
    $("schedules-problem").hidden = true;
    $("schedule-form").reset();
  } catch (p) {
    showProblem($("schedules-problem"), p);
  } finally {
    $("schedule-add").disabled = false;
  }
  refreshSchedules();
}

async function remove(id, button) {
  button.disabled = true;
  try {
    await deleteSchedule(sessionID, id);
    $("schedules-problem").hidden = true;
  } catch (p) {
    showProblem($("schedules-problem"), p);
    button.disabled = false;
  }
  refreshSchedules();
}
