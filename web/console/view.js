// Renders a conversation's items (see conversation.js) into the DOM,
// touching only the items that changed, so a token costs one text update.

import { replacedAll } from "./conversation.js";
import { authHeaders } from "./api.js";
import { h } from "./dom.js";

export class ConversationView {
  // root is the conversation's container; onDecide(item, decision, reason)
  // answers an approval and returns a promise that rejects with a Problem.
  constructor(root, { onDecide }) {
    this.root = root;
    this.onDecide = onDecide;
    this.nodes = new Map();
  }

  reset() {
    this.root.replaceChildren();
    this.nodes.clear();
  }

  // render brings the DOM in step with state: items it has not drawn are
  // added in order, and the changed ones are redrawn.
  render(state, changed) {
    const follow = this.atBottom();
    if (changed.has(replacedAll)) this.reset(); // a snapshot replaced the conversation
    for (const item of state.items) {
      let node = this.nodes.get(item.key);
      if (!node) {
        node = this.create(item);
        this.nodes.set(item.key, node);
        this.root.append(node.el);
        node.update(item);
      } else if (changed.has(item.key)) {
        node.update(item);
      }
    }
    if (follow) this.root.scrollTop = this.root.scrollHeight;
  }

  atBottom() {
    const r = this.root;
    return r.scrollHeight - r.scrollTop - r.clientHeight < 80;
  }

  create(item) {
    switch (item.kind) {
      case "message": return messageNode(item);
      case "reasoning": return reasoningNode();
      case "tool": return toolNode(item);
      case "approval": return approvalNode(item, this.onDecide);
      case "subagent": return subagentNode();
      case "end": return endNode();
      case "resumed": return noteNode("note note-resumed");
      default: return noteNode("note");
    }
  }
}

function messageNode(item) {
  const text = h("div", { class: "text" });
  const images = h("div", { class: "images" });
  const el = h("div", { class: `msg msg-${item.role}`, "data-key": item.key },
    h("div", { class: "who" }, item.role === "user" ? item.from || "You" : item.agent || item.role), text, images);
  if (item.from) el.classList.add("msg-posted"); // kerneld posted it, not the person reading
  let shown = 0;
  return {
    el,
    update(m) {
      text.textContent = m.text;
      el.classList.toggle("streaming", m.open);
      for (; m.images && shown < m.images.length; shown++) images.append(imageNode(m.images[shown]));
    },
  };
}

// imageNode shows an image of a message. One kerneld keeps is fetched
// with the console's key and shown as a data: URL (the console's policy
// loads images from itself and data: only); one at a URL of the client's
// is a link, since the console loads nothing from elsewhere.
function imageNode(img) {
  if (!img.kept) return h("a", { class: "image-link", href: img.src, target: "_blank", rel: "noopener noreferrer" }, "image");
  const el = h("img", { class: "image", alt: "an image sent with this message" });
  fetch(img.src, { headers: authHeaders() })
    .then((res) => (res.ok ? res.blob() : Promise.reject(new Error(res.statusText))))
    .then((blob) => new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(blob);
    }))
    .then((url) => { el.src = url; })
    .catch(() => { el.alt = "an image that could not be loaded"; });
  return el;
}

function reasoningNode() {
  const summary = h("summary", {}, "Reasoning");
  const text = h("div", { class: "text" });
  const el = h("details", { class: "reasoning" }, summary, text);
  return {
    el,
    update(r) {
      summary.textContent = r.open ? "Thinking…" : `Reasoning (${r.text.length} characters)`;
      text.textContent = r.text;
    },
  };
}

// pretty indents JSON text, or returns the text as it is.
export function pretty(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// compact writes JSON text on one line, or returns the text as it is.
function compact(text) {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}

// readable writes short JSON on one line and long JSON indented.
function readable(text) {
  const line = compact(text);
  return line.length <= 100 ? line : pretty(text);
}

// A tool call: its name and arguments on one line (in full below when they
// are long), then its result once it has one.
function toolNode(item) {
  const badge = h("span", { class: "badge" });
  const inline = h("code", { class: "args-inline" });
  const args = h("pre", { class: "args" });
  const argsBlock = h("div", { hidden: true }, h("div", { class: "label" }, "Arguments"), args);
  const result = h("pre", { class: "result" });
  const resultBlock = h("div", { hidden: true }, h("div", { class: "label" }, "Result"), result);
  const el = h("details", { class: "tool", open: true, "data-key": item.key },
    h("summary", {}, h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
      h("code", { class: "tool-name" }, item.name), inline, badge),
    h("div", { class: "tool-body" }, argsBlock, resultBlock));
  return {
    el,
    update(t) {
      const state = t.result === null ? "running" : t.isError ? "error" : "done";
      badge.textContent = state;
      badge.className = `badge badge-${state}`;
      const oneLine = compact(t.args || "{}");
      inline.textContent = oneLine;
      argsBlock.hidden = oneLine.length <= 60;
      args.textContent = pretty(t.args || "{}");
      resultBlock.hidden = t.result === null;
      result.textContent = t.result === null ? "" : readable(t.result);
    },
  };
}

function approvalNode(item, onDecide) {
  return ApprovalCard(item, onDecide);
}

// ApprovalCard is a tool call waiting for a decision: approve, deny (with
// a reason), or always (approve the tool's later calls in the session,
// or with "only these arguments" only its identical calls). onDecide(item,
// decision, reason, sameArguments) returns a promise that rejects with a
// Problem. extra.context is shown above the arguments (the inbox names
// the session).
export function ApprovalCard(item, onDecide, extra = {}) {
  const status = h("p", { class: "approval-state", role: "status" });
  const problem = h("div", { class: "problem", role: "alert", hidden: true });
  const reason = h("input", { type: "text", class: "reason", placeholder: "Reason (optional, for a denial)", "aria-label": "Reason for denying" });
  const approve = h("button", { type: "button", class: "primary approve" }, "Approve");
  const always = h("button", { type: "button", class: "always", title: `Approve, and run ${item.toolName} without asking for the rest of this session` }, "Always");
  const same = h("input", { type: "checkbox", class: "same-arguments" });
  const sameLabel = h("label", { class: "same", title: "With Always: only later calls with exactly these arguments run without asking" }, same, " only these arguments");
  const deny = h("button", { type: "button", class: "danger deny" }, "Deny");
  const actions = h("div", { class: "approval-actions" }, approve, always, sameLabel, deny, reason);
  const title = h("h3", {}, "Approval needed: ", h("code", {}, item.toolName));
  const args = h("div", {}, h("div", { class: "label" }, "Arguments"), h("pre", { class: "args" }, pretty(item.arguments)));
  const el = h("section", { class: "approval", "data-key": item.key || null, "aria-label": `Approval for ${item.toolName}` },
    title, extra.context || "", args, actions, status, problem);
  const buttons = [approve, always, deny];
  let current = item;
  const decide = async (decision) => {
    for (const b of buttons) b.disabled = true;
    problem.hidden = true;
    try {
      await onDecide(current, decision, reason.value.trim(), decision === "always" && same.checked);
    } catch (p) {
      showProblem(problem, p);
      for (const b of buttons) b.disabled = false;
    }
  };
  approve.addEventListener("click", () => decide("approve"));
  always.addEventListener("click", () => decide("always"));
  deny.addEventListener("click", () => decide("deny"));
  return {
    el,
    update(a) {
      current = a;
      const pending = a.state === "pending";
      // Once decided, the card shrinks to one line: the tool call above
      // it shows the arguments and the result.
      actions.hidden = args.hidden = title.hidden = !pending;
      el.classList.toggle("pending", pending);
      status.textContent = pending
        ? (a.expiresAt ? `Waiting for your decision (denied automatically at ${new Date(a.expiresAt).toLocaleTimeString()}).` : "Waiting for your decision.")
        : `${a.toolName}: ${a.state}${a.reason ? ` (${a.reason})` : ""}.`;
      status.className = `approval-state state-${a.state}`;
    },
  };
}

function subagentNode() {
  const link = h("a", {});
  const badge = h("span", { class: "badge" });
  const text = h("div", { class: "text" });
  const kind = h("span", {}, "Child session ");
  const el = h("div", { class: "subagent" }, h("span", { "aria-hidden": "true" }, "↳ "), kind, link, " ", badge, text);
  return {
    el,
    update(c) {
      kind.textContent = c.background ? "Background child session " : "Child session ";
      el.classList.toggle("background", Boolean(c.background));
      link.textContent = c.name;
      if (c.childSessionId) link.href = `#/s/${encodeURIComponent(c.childSessionId)}`;
      badge.textContent = c.state;
      badge.className = `badge badge-${c.state === "finished" ? "done" : c.state}`;
      text.textContent = c.text;
    },
  };
}

const endings = {
  cancelled: "Run cancelled.",
  interrupted: "Run interrupted by new input.",
  failed: "Run failed",
};

function endNode() {
  const el = h("div", { class: "run-end", role: "status" });
  return {
    el,
    update(e) {
      el.className = `run-end run-end-${e.outcome}`;
      el.textContent = endings[e.outcome] || `Run ended: ${e.outcome}.`;
      if (e.error) el.textContent += `: ${e.error.message}${e.error.code ? ` (${e.error.code})` : ""}`;
    },
  };
}

function noteNode(className) {
  const el = h("div", { class: className });
  return { el, update(n) { el.textContent = n.text; } };
}

// showProblem fills el with a refused request's problem: its title and
// status, its detail as the server wrote it, and its code.
export function showProblem(el, p) {
  el.replaceChildren(
    h("strong", {}, p.title || "Request refused", p.status ? ` (${p.status})` : ""),
    p.detail ? h("span", { class: "detail" }, ` ${p.detail}`) : "",
    p.code ? h("code", { class: "code" }, p.code) : "");
  el.hidden = false;
}
