// The inbox: every tool call waiting for a person's decision, across the
// sessions of the tenant (GET /approvals), at #/inbox, and its count in
// the top bar. It is read again when the session feed says an approval
// was requested or decided, or a run ended: never on a timer.

import * as api from "./api.js";
import { h, when } from "./dom.js";
import { ApprovalCard } from "./view.js";

const $ = (id) => document.getElementById(id);

let items = []; // the pending approvals, oldest request first
let more = false;
let asked = 0;
let timer = 0;
let cards = new Map(); // key → the card drawn for it
// typed holds the reason typed in each card until its call is decided: a
// call leaves the inbox while its run carries out the call decided before
// it (the session is running, not waiting), and comes back as a new card.
const typed = new Map();
let titleOf = (id) => id;

// initInbox takes how to name a session (its title, from the sidebar).
export function initInbox(sessionTitle) {
  titleOf = sessionTitle;
}

// refreshInbox reads the inbox again, soon: changes that come together
// (a run asking for two approvals) are read once.
export function refreshInbox() {
  clearTimeout(timer);
  timer = setTimeout(readInbox, 50);
}

// changes reports whether feed event ev can change the inbox.
export function changesInbox(ev) {
  return !ev || ["approval.requested", "approval.decided", "run.ended", "session.deleted", "session.closed", "session.status"].includes(ev.type);
}

async function readInbox() {
  const mine = ++asked;
  let page;
  try {
    page = await api.listInbox(200);
  } catch (p) {
    if (mine === asked) showInboxProblem(p);
    return;
  }
  if (mine !== asked) return;
  $("inbox-problem").hidden = true;
  items = page.data;
  more = Boolean(page.next_cursor);
  showCount();
  if (!$("inbox").hidden) renderInbox();
}

function showInboxProblem(p) {
  const el = $("inbox-problem");
  el.replaceChildren(h("strong", {}, p.title || "Request refused", p.status ? ` (${p.status})` : ""),
    p.detail ? ` ${p.detail}` : "", p.code ? h("code", { class: "code" }, p.code) : "");
  el.hidden = false;
}

function showCount() {
  const n = items.length;
  $("inbox-count").textContent = n ? `${n}${more ? "+" : ""}` : "";
  $("inbox-link").classList.toggle("has-pending", n > 0);
  $("inbox-link").setAttribute("aria-label", n ? `Inbox: ${n}${more ? " or more" : ""} waiting for your approval` : "Inbox: nothing waiting");
}

const keyOf = (it) => `${it.session_id}/${it.run_id}/${it.tool_call_id}`;

// renderInbox draws the pending approvals; a card decided here stays
// (saying what was decided) until the inbox is read again without it.
export function renderInbox() {
  const list = $("inbox-list");
  const keep = new Map();
  for (const it of items) {
    const key = keyOf(it);
    let card = cards.get(key);
    if (!card) card = newCard(it);
    keep.set(key, card);
  }
  cards = keep;
  const nodes = [...keep.values()].map((c) => c.el);
  if (nodes.length === 0) nodes.push(h("p", { class: "empty" }, "Nothing is waiting for your approval."));
  list.replaceChildren(...nodes);
}

function newCard(it) {
  const key = keyOf(it);
  const item = {
    toolName: it.tool_name, arguments: it.arguments, expiresAt: it.expires_at || "", state: "pending",
    runId: it.run_id, toolCallId: it.tool_call_id, sessionId: it.session_id,
  };
  const card = ApprovalCard(item, (_, decision, reason, same) =>
    api.decideApproval(it.session_id, it.run_id, it.tool_call_id, decision, reason, same).then((a) => {
      typed.delete(key);
      card.update({ ...item, state: a.state, reason: a.reason || "" });
      refreshInbox();
    }), {
    context: h("p", { class: "inbox-session" },
      h("a", { href: `#/s/${encodeURIComponent(it.session_id)}` }, titleOf(it.session_id, it.agent)),
      ` · ${it.agent} · asked ${when(it.requested_at)}`),
  });
  const reason = card.el.querySelector(".reason");
  reason.value = typed.get(key) || "";
  reason.addEventListener("input", () => typed.set(key, reason.value));
  card.el.setAttribute("role", "listitem");
  card.el.dataset.session = it.session_id;
  card.update(item);
  return card;
}
