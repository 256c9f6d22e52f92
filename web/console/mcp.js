// The open session's MCP servers: those attached to it, with the state
// each is in on the kerneld that answered (mcp_servers of GET
// /sessions/{id}), a form to attach another, and Detach. kerneld takes
// the session's whole list at once (PATCH /sessions/{id} {mcp_servers}),
// and only while no run is under way: a refusal shows its problem here.
// Header values may name the tenant's secrets as ${NAME}: the console
// sends and shows the reference, never a secret.

import * as api from "./api.js";
import { h } from "./dom.js";
import { showProblem } from "./view.js";

const $ = (id) => document.getElementById(id);

let session = null; // the open session, as last read
let onChanged = () => {};

// initMCP wires the panel; changed() is called once kerneld took a new
// list, so that the page reads the session again.
export function initMCP(changed) {
  onChanged = changed;
  $("mcp-toggle").addEventListener("click", () => openMCP($("mcp").hidden));
  $("mcp-form").addEventListener("submit", attach);
  $("mcp-kind").addEventListener("change", showKind);
  showKind();
}

// openMCP shows or hides the panel.
export function openMCP(open) {
  $("mcp").hidden = !open;
  $("mcp-toggle").setAttribute("aria-expanded", String(open));
  if (open) $("mcp-problem").hidden = true;
}

// resetMCP forgets the session the panel showed, as another opens.
export function resetMCP() {
  session = null;
  openMCP(false);
  $("mcp-list").replaceChildren();
  $("mcp-toggle").textContent = "MCP";
}

// showMCP draws the servers of session as kerneld last described them.
export function showMCP(s) {
  session = s;
  const servers = s.mcp_servers || [];
  $("mcp-toggle").textContent = servers.length ? `MCP (${servers.length})` : "MCP";
  $("mcp-list").replaceChildren(...(servers.length
    ? servers.map(serverItem)
    : [h("li", { class: "empty" }, "No MCP server is attached to this session. Its agent's own servers, if any, are in its file.")]));
  const closed = s.state === "closed";
  for (const el of $("mcp-form").elements) el.disabled = closed;
}

// serverItem is one attached server: its name and state, where it is,
// the headers it is sent with, and Detach.
function serverItem(srv) {
  const state = srv.state || "unknown";
  const where = srv.transport === "stdio" ? `stdio server ${srv.stdio}` : srv.url;
  const headers = Object.entries(srv.headers || {}).map(([k, v]) => `${k}: ${v}`).join("\n");
  const detach = h("button", { type: "button", class: "quiet detach", "aria-label": `Detach ${srv.name}` }, "Detach");
  detach.addEventListener("click", () => detachServer(srv.name, detach));
  return h("li", { class: "mcp-server", "data-name": srv.name },
    h("div", { class: "line" },
      h("code", { class: "name" }, srv.name),
      h("span", { class: `badge mcp-state mcp-${state}`, title: "On the kerneld that answered" }, state),
      srv.require_approval ? h("span", { class: "badge" }, "asks before each call") : "",
      detach),
    h("div", { class: "where" }, where),
    headers ? h("pre", { class: "headers" }, headers) : "",
    srv.error ? h("div", { class: "mcp-error" }, srv.error) : "",
    h("div", { class: "tools-hint" }, `Its tools reach the agent as ${srv.name}__<tool>.`));
}

// asGiven turns a server as kerneld describes it back into what a client
// sends, so that the list can be sent again with one more or one less.
function asGiven(srv) {
  const out = { name: srv.name };
  if (srv.transport === "stdio") out.stdio = srv.stdio;
  else out.url = srv.url;
  if (srv.headers && Object.keys(srv.headers).length) out.headers = srv.headers;
  if (srv.require_approval) out.require_approval = true;
  return out;
}

// showKind shows the URL and headers of an HTTP server, or the name of a
// stdio server the operator allows.
function showKind() {
  const stdio = $("mcp-kind").value === "stdio";
  $("mcp-url-field").hidden = stdio;
  $("mcp-headers-field").hidden = stdio;
  $("mcp-stdio-field").hidden = !stdio;
  $("mcp-url").required = !stdio;
  $("mcp-stdio").required = stdio;
}

// parseHeaders reads "Name: value" lines; it throws a Problem naming a
// line it cannot read.
function parseHeaders(text) {
  const headers = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    const colon = line.indexOf(":");
    if (colon <= 0) {
      throw new api.Problem({ status: 0, title: "Headers not sent", detail: `line ${i + 1} is not "Name: value"` });
    }
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}

// fromForm is the server the form describes.
function fromForm() {
  const srv = { name: $("mcp-name").value.trim() };
  if ($("mcp-kind").value === "stdio") {
    srv.stdio = $("mcp-stdio").value.trim();
  } else {
    srv.url = $("mcp-url").value.trim();
    const headers = parseHeaders($("mcp-headers").value);
    if (Object.keys(headers).length) srv.headers = headers;
  }
  if ($("mcp-approval").checked) srv.require_approval = true;
  return srv;
}

async function attach(e) {
  e.preventDefault();
  if (!session) return;
  let srv;
  try {
    srv = fromForm();
  } catch (p) {
    showProblem($("mcp-problem"), p);
    return;
  }
  const list = [...(session.mcp_servers || []).map(asGiven), srv];
  if (await send(list, $("mcp-attach"))) {
    $("mcp-form").reset();
    showKind();
  }
}

function detachServer(name, button) {
  if (!session) return;
  send((session.mcp_servers || []).filter((s) => s.name !== name).map(asGiven), button);
}

// send gives kerneld the session's new list and reports whether it took it.
async function send(list, button) {
  const id = session.id;
  button.disabled = true;
  try {
    const updated = await api.updateSession(id, { mcp_servers: list });
    if (!session || session.id !== id) return true; // another session is open now
    $("mcp-problem").hidden = true;
    showMCP(updated);
    onChanged();
    return true;
  } catch (p) {
    showProblem($("mcp-problem"), p);
    return false;
  } finally {
    button.disabled = false;
  }
}
