// The conversation of one session, folded from its AG-UI events into a
// list of items to render: messages, reasoning, tool calls, approvals,
// child sessions and how each run ended. apply() is pure bookkeeping (no
// DOM), so the state can be saved and restored as JSON.

const storePrefix = "kerneld.console.conversation.";

export function newState() {
  return { v: 1, lastSeq: 0, activeRunId: null, items: [] };
}

// resumePoint is where a view of session id starts reading its stream,
// and the one place that decides it. A tab that rendered this session
// before (a reload, or a return to it from the list) restores what it
// rendered and resumes after the last event it had: nothing is missed or
// doubled, and the reasoning, approvals and errors of earlier runs are
// still there. Otherwise it starts afresh.
export function resumePoint(id) {
  const saved = load(id);
  if (saved) return { state: saved, query: `after=${saved.lastSeq}` };
  return freshStart();
}

// freshStart reads a session anew: a MESSAGES_SNAPSHOT of the history of
// the runs that are over, then the run in progress from its start, then
// live events, rather than every token of every run since the first.
export function freshStart() {
  return { state: newState(), query: "snapshot=messages" };
}

function load(id) {
  try {
    const state = JSON.parse(sessionStorage.getItem(storePrefix + id));
    return state && state.v === 1 && Array.isArray(state.items) ? state : null;
  } catch {
    return null;
  }
}

// save keeps state for this tab. The items and lastSeq are written in one
// value, so a restored state and its cursor always agree. When storage is
// full the saved copy is dropped: a reload then replays the log.
export function save(id, state) {
  try {
    sessionStorage.setItem(storePrefix + id, JSON.stringify(state));
  } catch {
    forget(id);
  }
}

export function forget(id) {
  sessionStorage.removeItem(storePrefix + id);
}

// replacedAll, among the changed keys apply returns, means the items were
// replaced: what was drawn of them must go.
export const replacedAll = "*";

const kerneldMeta = (ev) => (ev.metadata && ev.metadata.kerneld) || {};

// snapshotRun reports whether ev is the RUN_STARTED or RUN_FINISHED of the
// run a snapshot of an idle session comes in: it puts the snapshot inside
// a run, as AG-UI requires, but is no run of the session.
export const snapshotRun = (ev) => kerneldMeta(ev).snapshot === true;

function find(state, key) {
  // Items that change are almost always near the end: search from there.
  for (let i = state.items.length - 1; i >= 0; i--) {
    if (state.items[i].key === key) return state.items[i];
  }
  return null;
}

function add(state, item, changed) {
  state.items.push(item);
  changed.add(item.key);
  return item;
}

function update(state, key, changed, fn) {
  const item = find(state, key);
  if (item) {
    fn(item);
    changed.add(key);
  }
  return item;
}

// apply folds event ev, the event with seq, into state and returns the
// keys of the items it added or changed.
export function apply(state, ev, seq) {
  const changed = new Set();
  if (seq > 0) state.lastSeq = seq;
  const runId = kerneldMeta(ev).runId || ev.runId || null;
  const handler = handlers[ev.type];
  if (handler && !snapshotRun(ev)) handler(state, ev, changed, runId);
  return changed;
}

const handlers = {
  RUN_STARTED(state, ev) {
    state.activeRunId = ev.runId;
    // Another agent than the session's answers this run: its messages say so.
    state.runAgent = kerneldMeta(ev).agent || null;
    // kerneld posted this run's input itself: the input says who did.
    state.inputFrom = kerneldMeta(ev).source === "schedule" ? "Scheduled" : null;
  },
  RUN_FINISHED(state, ev, changed) {
    const outcome = (ev.outcome && ev.outcome.type) || "success";
    const reason = kerneldMeta(ev).reason || outcome;
    endRun(state, ev.runId, changed, outcome === "cancelled" ? reason : "succeeded", null);
  },
  RUN_ERROR(state, ev, changed, runId) {
    endRun(state, runId, changed, "failed", { code: ev.code || "", message: ev.message || "" });
  },
  TEXT_MESSAGE_START(state, ev, changed, runId) {
    const role = ev.role || "assistant";
    const agent = role === "assistant" ? state.runAgent || null : null;
    const from = role === "user" ? state.inputFrom || null : null;
    add(state, { kind: "message", key: `m:${ev.messageId}`, role, agent, from, text: "", open: true, runId }, changed);
  },
  TEXT_MESSAGE_CONTENT(state, ev, changed) {
    update(state, `m:${ev.messageId}`, changed, (m) => { m.text += ev.delta; });
  },
  TEXT_MESSAGE_END(state, ev, changed) {
    update(state, `m:${ev.messageId}`, changed, (m) => { m.open = false; });
  },
  REASONING_MESSAGE_START(state, ev, changed, runId) {
    add(state, { kind: "reasoning", key: `r:${ev.messageId}`, text: "", open: true, runId }, changed);
  },
  REASONING_MESSAGE_CONTENT(state, ev, changed) {
    update(state, `r:${ev.messageId}`, changed, (r) => { r.text += ev.delta; });
  },
  REASONING_MESSAGE_END(state, ev, changed) {
    update(state, `r:${ev.messageId}`, changed, (r) => { r.open = false; });
  },
  TOOL_CALL_START(state, ev, changed, runId) {
    add(state, { kind: "tool", key: `t:${ev.toolCallId}`, id: ev.toolCallId, name: ev.toolCallName, args: "", result: null, isError: false, runId }, changed);
  },
  TOOL_CALL_ARGS(state, ev, changed) {
    update(state, `t:${ev.toolCallId}`, changed, (t) => { t.args += ev.delta; });
  },
  TOOL_CALL_RESULT(state, ev, changed) {
    const content = typeof ev.content === "string" ? ev.content : JSON.stringify(ev.content);
    update(state, `t:${ev.toolCallId}`, changed, (t) => {
      t.result = content;
      t.isError = Boolean(kerneldMeta(ev).isError);
    });
  },
  SUBAGENT_STARTED(state, ev, changed, runId) {
    add(state, {
      kind: "subagent", key: `c:${ev.subagentRunId}`, name: ev.name, state: "running",
      childSessionId: kerneldMeta(ev).childSessionId || "", toolCallId: ev.parentToolCallId || "", text: "", runId,
    }, changed);
  },
  SUBAGENT_FINISHED(state, ev, changed) {
    update(state, `c:${ev.subagentRunId}`, changed, (c) => { c.state = "finished"; c.text = ev.result || ""; });
  },
  SUBAGENT_ERROR(state, ev, changed) {
    update(state, `c:${ev.subagentRunId}`, changed, (c) => { c.state = "error"; c.text = ev.message || ev.code || ""; });
  },
  MESSAGES_SNAPSHOT(state, ev, changed) {
    // A snapshot replaces the conversation so far: what follows is the
    // running run, if any, then live events.
    state.items = [];
    changed.add(replacedAll);
    for (const m of ev.messages || []) {
      snapshotItems(state, m, changed);
      if (m.role === "user" && m.metadata && m.metadata.kerneld) state.lastRunId = m.metadata.kerneld.runId;
    }
  },
  CUSTOM(state, ev, changed, runId) {
    const v = ev.value || {};
    switch (ev.name) {
      case "kerneld.approval.requested":
        add(state, {
          kind: "approval", key: `a:${v.toolCallId}`, runId, toolCallId: v.toolCallId, toolName: v.toolName,
          arguments: v.arguments, expiresAt: v.expiresAt || "", state: "pending", reason: "",
        }, changed);
        break;
      case "kerneld.approval.resolved":
        update(state, `a:${v.toolCallId}`, changed, (a) => {
          a.state = v.decision === "approve" || v.decision === "always" ? "approved" : v.decision === "deny" ? "denied" : "cancelled";
          a.reason = v.reason || "";
        });
        break;
      case "kerneld.approval.auto":
        add(state, { kind: "note", key: `auto:${v.toolCallId}`, text: `${v.toolName} ran without asking: ${v.reason || v.permissionMode}.` }, changed);
        break;
      case "kerneld.run.queued":
        add(state, { kind: "note", key: `q:${v.runId}`, text: `Input queued (position ${v.position}): it runs when this run ends.` }, changed);
        break;
      case "kerneld.message.images":
        update(state, `m:${v.messageId}`, changed, (m) => { m.images = messageImages(kerneldMeta(ev).sessionId, v.images); });
        break;
      case "kerneld.child.started":
        add(state, {
          kind: "subagent", key: `bg:${v.childRunId}`, name: v.agent, state: "running", background: true,
          childSessionId: v.childSessionId || "", toolCallId: v.toolCallId || "",
          text: "It works in the background; its answer arrives here when it ends.", runId,
        }, changed);
        break;
      case "kerneld.child.result":
        childResult(state, v, changed);
        break;
      case "kerneld.run.steered":
        add(state, { kind: "note", key: `s:${v.steerRunId}`, text: "Input added to this run; the agent reads it at its next step." }, changed);
        break;
      case "kerneld.run.resumed":
        resumed(state, v, changed);
        break;
      case "kerneld.session.cleared":
        cleared(state, v, runId, changed);
        break;
    }
  },
};

// cleared folds kerneld.session.cleared: the conversation was emptied in
// place (from this tab or any other client), so what was drawn of it
// goes, and a note says why. The run that cleared it answered nothing:
// Regenerate has nothing to answer again until the next run.
function cleared(state, v, runId, changed) {
  state.items = [];
  state.lastRunId = null;
  state.clearRunId = runId;
  changed.add(replacedAll);
  const memory = v.memory ? "and its memory were" : "was";
  add(state, { kind: "note", key: `cleared:${v.messageId}`, text: `The conversation ${memory} cleared: the agent starts afresh.` }, changed);
}

// childResult folds kerneld.child.result: the background child's item
// says how it ended, and the input that follows (its answer, which
// kerneld posts) says whose it is rather than "You". Folded into a busy
// run (child_results: steer), no input follows it in the stream.
function childResult(state, v, changed) {
  const ok = v.state === "succeeded";
  const item = update(state, `bg:${v.childRunId}`, changed, (c) => {
    c.state = ok ? "finished" : "error";
    c.text = ok ? "Its answer arrived below." : `It ended ${v.state}; that arrived below.`;
  });
  if (!item) { // started before this view's snapshot
    add(state, {
      kind: "subagent", key: `bg:${v.childRunId}`, name: v.agent, state: ok ? "finished" : "error", background: true,
      childSessionId: v.childSessionId || "", text: ok ? "Its answer arrived below." : `It ended ${v.state}.`,
    }, changed);
  }
  state.inputFrom = `Answer from ${v.agent}`;
}

// childResultPrefix starts the input kerneld posts with a background
// child's answer: a snapshot, which has no events, knows it by that.
const childResultPrefix = "[child_result]";

// messageImages lists the images a user message carries: those kerneld
// keeps by the route that serves them, the others by their URL.
function messageImages(sessionId, images) {
  return (images || []).map((img) => (img.hash
    ? { src: `/sessions/${encodeURIComponent(sessionId || "")}/images/${img.hash}`, kept: true }
    : { src: img.url, kept: false }));
}

// The notes of a run continued after the process running it stopped, by
// the reason kerneld gives.
const resumedNotes = {
  crash: "kerneld restarted during this run; the answer goes on from its last completed step.",
  takeover: "The server running this run stopped; another goes on from its last completed step.",
  shutdown: "kerneld was restarted during this run (a deploy); the answer goes on from its last completed step.",
  store_outage: "The store was unavailable for a while; the answer goes on from its last completed step.",
};

// resumed folds kerneld.run.resumed: the model call the stopped process
// cut short is made again, so what it had shown (its text, reasoning and
// tool calls) gives way to what it shows now, and a small note says why
// the answer went quiet. The run stays one answer.
function resumed(state, v, changed) {
  const cut = new Set();
  for (const id of v.cutMessageIds || []) cut.add(`m:${id}`).add(`r:${id}`);
  for (const id of v.cutToolCallIds || []) cut.add(`t:${id}`);
  if (cut.size > 0) {
    state.items = state.items.filter((item) => !cut.has(item.key));
    changed.add(replacedAll);
  }
  add(state, {
    kind: "resumed", key: `resumed:${state.lastSeq}`, reason: v.reason,
    text: resumedNotes[v.reason] || "The run was resumed from its last completed step.",
  }, changed);
}

function endRun(state, runId, changed, outcome, error) {
  if (state.activeRunId === runId) state.activeRunId = null;
  if (runId !== state.clearRunId) state.lastRunId = runId; // the run Regenerate answers again
  // A run that answered needs no marker; any other ending is said plainly.
  if (outcome !== "succeeded") add(state, { kind: "end", key: `end:${runId}`, runId, outcome, error }, changed);
  // Whatever still waits for a decision was cancelled with the run.
  for (const item of state.items) {
    if (item.kind === "approval" && item.runId === runId && item.state === "pending") {
      item.state = "cancelled";
      changed.add(item.key);
    }
  }
}

// snapshotItems adds the items of one AG-UI message of a MESSAGES_SNAPSHOT.
function snapshotItems(state, m, changed) {
  if (m.role === "tool") {
    update(state, `t:${m.toolCallId}`, changed, (t) => {
      t.result = m.content;
      t.isError = Boolean(m.metadata && m.metadata.kerneld && m.metadata.kerneld.isError);
    });
    return;
  }
  if (Array.isArray(m.content)) { // a user message with images: its text, then each image by URL
    const text = m.content.filter((p) => p.type === "text").map((p) => p.text).join("");
    const images = m.content.filter((p) => p.type === "image" && p.source)
      .map((p) => ({ src: p.source.value, kept: p.source.value.startsWith("/sessions/") }));
    add(state, { kind: "message", key: `m:${m.id}`, role: m.role, text, images, open: false }, changed);
  } else if (m.content) {
    const from = m.role === "user" && m.content.startsWith(childResultPrefix) ? "Answer from a background child" : null;
    // Another agent than the session's wrote it: kerneld names it.
    const agent = (m.role === "assistant" && m.metadata && m.metadata.kerneld && m.metadata.kerneld.agent) || null;
    add(state, { kind: "message", key: `m:${m.id}`, role: m.role, agent, from, text: m.content, open: false }, changed);
  }
  for (const c of m.toolCalls || []) {
    add(state, { kind: "tool", key: `t:${c.id}`, id: c.id, name: c.function.name, args: c.function.arguments, result: null, isError: false }, changed);
  }
}
