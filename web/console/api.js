// The kerneld API as the console uses it: every request carries the API
// key the person gave (kept in this tab's sessionStorage only), and every
// refusal becomes a Problem carrying the server's problem+json.

const keyItem = "kerneld.console.apiKey";

export function apiKey() {
  return sessionStorage.getItem(keyItem) || "";
}

export function setAPIKey(key) {
  if (key) sessionStorage.setItem(keyItem, key);
  else sessionStorage.removeItem(keyItem);
}

// authHeaders are the headers that authenticate a request, if a key is set.
export function authHeaders() {
  const key = apiKey();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

// Problem is a refused request: the RFC 9457 body the server sent, or one
// made up here when the request never got an answer.
export class Problem extends Error {
  constructor(body) {
    super(body.detail || body.title || `HTTP ${body.status}`);
    this.status = body.status;
    this.code = body.code || "";
    this.title = body.title || "";
    this.detail = body.detail || "";
    this.body = body;
  }
}

// problemFrom reads a refused response's problem+json, or describes the
// response when its body is something else (a proxy's HTML page, say).
export async function problemFrom(res) {
  const text = await res.text().catch(() => "");
  try {
    const body = JSON.parse(text);
    if (body && typeof body === "object") return new Problem({ status: res.status, ...body });
  } catch {
    // not JSON: described below
  }
  return new Problem({ status: res.status, title: res.statusText || `HTTP ${res.status}`, detail: text.slice(0, 300) });
}

// networkProblem describes a request that got no answer at all.
export function networkProblem(err) {
  return new Problem({ status: 0, code: "network", title: "No answer from kerneld", detail: String(err.message || err) });
}

// request sends one API request and returns its decoded JSON body (or
// null for an empty one); it throws a Problem when refused.
export async function request(method, path, body, headers = {}) {
  const init = { method, headers: { Accept: "application/json", ...authHeaders(), ...headers } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw networkProblem(err);
  }
  if (!res.ok) throw await problemFrom(res);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

const enc = encodeURIComponent;

export const listAgents = () => request("GET", "/agents");

// listSessions returns one page, newest first; filters left empty are not sent.
export function listSessions({ agent = "", state = "", parentID = "", cursor = "", limit = 20 } = {}) {
  const q = new URLSearchParams({ limit: String(limit) });
  if (agent) q.set("agent", agent);
  if (state) q.set("state", state);
  if (parentID) q.set("parent_id", parentID);
  if (cursor) q.set("cursor", cursor);
  return request("GET", `/sessions?${q}`);
}

export const getSession = (id) => request("GET", `/sessions/${enc(id)}`);
export const createSession = (agent) => request("POST", "/sessions", { agent });
export const deleteSession = (id) => request("DELETE", `/sessions/${enc(id)}`);

// sendInput starts a run; ifBusy is the busy policy (reject, queue,
// interrupt, steer); agent, another agent of the session's agents to
// answer, or null for the session's own. The idempotency key makes a
// retried click safe.
// The run records that its input came from the console (source), as the
// CLI's say cli.
export function sendInput(id, input, ifBusy, idempotencyKey, agent) {
  return request("POST", `/sessions/${enc(id)}/run`, { input, if_busy: ifBusy || null, agent: agent || null, source: "console" },
    idempotencyKey ? { "Idempotency-Key": idempotencyKey } : {});
}

export const cancelRun = (id, runID) => request("POST", `/sessions/${enc(id)}/runs/${enc(runID)}/cancel`);

export const listApprovals = (id, runID) => request("GET", `/sessions/${enc(id)}/runs/${enc(runID)}/approvals`);

// decideApproval answers a tool call: decision is approve, deny or
// always; sameArguments, with always, limits it to identical calls.
export function decideApproval(id, runID, toolCallID, decision, reason, sameArguments) {
  const body = { decision, reason: reason || null };
  if (decision === "always") body.same_arguments = Boolean(sameArguments);
  return request("POST", `/sessions/${enc(id)}/runs/${enc(runID)}/approvals/${enc(toolCallID)}`, body);
}

// listInbox returns the first page of the approvals waiting across the
// caller's sessions, oldest request first.
export const listInbox = (limit = 200) => request("GET", `/approvals?state=pending&limit=${limit}`);

// updateSession patches a session: title, name, permission_mode, ...
export const updateSession = (id, patch) => request("PATCH", `/sessions/${enc(id)}`, patch);

// The conversation controls: a fork copies the history into a new
// session (up to message atMessage, if given); regenerate answers a run's
// input again, in a fork; close ends the session for good (it stays
// readable).
export function forkSession(id, atMessage) {
  return request("POST", `/sessions/${enc(id)}/fork`, atMessage === undefined ? undefined : { at_message: atMessage });
}
export const regenerateRun = (id, runID) => request("POST", `/sessions/${enc(id)}/runs/${enc(runID)}/regenerate`);
export const closeSession = (id) => request("POST", `/sessions/${enc(id)}/close`);

// markRead records that this reader (this API key) has read session id
// up to event seq; clearSession empties its history in place.
export const markRead = (id, seq) => request("PUT", `/sessions/${enc(id)}/read`, { seq });
export const clearSession = (id) => request("POST", `/sessions/${enc(id)}/clear`);

// regenerate answers the last input of session id, made in run runID,
// again in a fork, and returns the fork. kerneld does it for an input of
// one of the session's runs. An input a fork copied belongs to the fork's
// first run, which kerneld cannot regenerate (409 run_not_regenerable):
// then the console does what regenerate does, in two steps: fork before
// that input, and send it to the fork (whose run, if refused, takes the
// fork away again, as kerneld's regenerate leaves nothing behind).
export async function regenerate(id, runID, idempotencyKey) {
  try {
    return (await regenerateRun(id, runID)).session;
  } catch (p) {
    if (p.code !== "run_not_regenerable") throw p;
  }
  const input = await lastInput(id);
  if (!input) throw new Problem({ status: 409, code: "run_not_regenerable", title: "Nothing to regenerate", detail: "this session has no input to answer again" });
  const fork = await forkSession(id, input.position - 1);
  try {
    await sendInput(fork.id, input.content, null, idempotencyKey);
  } catch (p) {
    await deleteSession(fork.id).catch(() => {}); // the problem below says what failed
    throw p;
  }
  return fork;
}

// lastInput returns the last user message of session id's history.
async function lastInput(id) {
  let last = null;
  let cursor = "";
  do {
    const q = new URLSearchParams({ limit: "200" });
    if (cursor) q.set("cursor", cursor);
    const page = await request("GET", `/sessions/${enc(id)}/messages?${q}`);
    for (const m of page.data) if (m.role === "user") last = m;
    cursor = page.next_cursor;
  } while (cursor);
  return last;
}
