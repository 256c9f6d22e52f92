// server.mjs: the CopilotKit runtime for this page, on node:http, with
// kerneld's agents as remote AG-UI agents. It also serves the page (the
// Vite build in dist/), so page and runtime share one origin.
//
//   KERNELD_URL      kerneld's address (default http://127.0.0.1:8080)
//   KERNELD_API_KEY  kerneld's API key, if it has keys configured
//   PORT             where to listen, on loopback (default 3000; 0: any free port)
//
// Run with COPILOTKIT_TELEMETRY_DISABLED=true (npm start sets it), so the
// runtime sends nothing anywhere but to kerneld.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime, InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { defer, from, mergeMap } from "rxjs";

const kerneld = (process.env.KERNELD_URL ?? "http://127.0.0.1:8080").replace(/\/$/, "");
const headers = process.env.KERNELD_API_KEY ? { Authorization: `Bearer ${process.env.KERNELD_API_KEY}` } : {};

// Each agent is kerneld's agent of that name: POST /agents/{name}/agui.
const agentNames = ["echo", "gated", "painter"];
const agents = Object.fromEntries(
  agentNames.map((name) => [name, new HttpAgent({ url: `${kerneld}/agents/${name}/agui`, headers })]),
);

// KerneldRunner is the runtime's in-memory runner, except where a page
// reconnects to a thread it is not running (a reload, another tab): the
// history then comes from kerneld, which keeps it, not from this
// process's memory, which a restart empties.
class KerneldRunner extends InMemoryAgentRunner {
  connect(request) {
    return defer(async () => {
      if (await this.isRunning(request)) return super.connect(request);
      return from(await threadFromKerneld(request.threadId));
    }).pipe(mergeMap((events) => events));
  }
}

// threadFromKerneld returns a thread as one AG-UI run a client can
// replay: its messages (kerneld's MESSAGES_SNAPSHOT) and its state (the
// last STATE_SNAPSHOT kerneld logged). A thread kerneld does not have is
// no events.
async function threadFromKerneld(threadId) {
  const id = encodeURIComponent(threadId);
  const session = await fetch(`${kerneld}/sessions/${id}`, { headers });
  if (session.status === 404) return [];
  if (!session.ok) throw new Error(`kerneld: GET /sessions/${id}: ${session.status}`);
  const runId = `history-${crypto.randomUUID()}`;
  const events = [{ type: "RUN_STARTED", threadId, runId }, await messagesSnapshot(id)];
  const state = await lastState(id);
  if (state !== undefined) events.push({ type: "STATE_SNAPSHOT", snapshot: state });
  events.push({ type: "RUN_FINISHED", threadId, runId });
  return events;
}

// messagesSnapshot reads the MESSAGES_SNAPSHOT of kerneld's snapshot
// stream (GET /sessions/{id}/events?snapshot=messages): the history's
// messages.
async function messagesSnapshot(id) {
  const stop = new AbortController();
  const res = await fetch(`${kerneld}/sessions/${id}/events?snapshot=messages`, {
    headers: { ...headers, Accept: "text/event-stream" }, signal: stop.signal,
  });
  if (!res.ok) throw new Error(`kerneld: GET /sessions/${id}/events: ${res.status}`);
  const decoder = new TextDecoder();
  let text = "";
  try {
    for await (const chunk of res.body) {
      text += decoder.decode(chunk, { stream: true });
      for (const frame of text.split("\n\n").slice(0, -1)) {
        const data = frame.split("\n").find((line) => line.startsWith("data: "));
        if (frame.includes("event: MESSAGES_SNAPSHOT") && data) return JSON.parse(data.slice(6));
      }
    }
  } finally {
    stop.abort();
  }
  throw new Error(`kerneld: the stream of ${id} ended without a MESSAGES_SNAPSHOT`);
}

// lastState returns the state the thread's latest run started with, as
// kerneld logged it, or undefined.
async function lastState(id) {
  const runs = await (await fetch(`${kerneld}/sessions/${id}/runs?limit=1`, { headers })).json();
  const run = runs.data?.[0];
  if (!run) return undefined;
  const page = await fetch(`${kerneld}/sessions/${id}/events?run_id=${encodeURIComponent(run.id)}`, {
    headers: { ...headers, Accept: "application/json" },
  });
  const snapshot = (await page.json()).data?.find((ev) => ev.type === "STATE_SNAPSHOT");
  return snapshot?.snapshot;
}

const runtime = new CopilotRuntime({ agents, runner: new KerneldRunner() });
const copilotkit = createCopilotNodeListener({ runtime, basePath: "/api/copilotkit" });

const dist = join(fileURLToPath(new URL(".", import.meta.url)), "dist");
const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml" };

// servePage answers with a file of the page's build, or its index.html.
async function servePage(req, res) {
  const path = normalize(new URL(req.url, "http://page").pathname).replace(/^(\.\.[/\\])+/, "");
  for (const file of [join(dist, path), join(dist, "index.html")]) {
    try {
      const body = await readFile(file);
      res.writeHead(200, { "Content-Type": types[extname(file)] ?? "application/octet-stream" });
      return res.end(body);
    } catch {
      // not a file: try the next
    }
  }
  res.writeHead(404).end("run `npm run build` first\n");
}

const server = createServer((req, res) => {
  if (req.url.startsWith("/api/copilotkit")) return copilotkit(req, res);
  servePage(req, res).catch(() => res.writeHead(500).end());
});
server.listen(Number(process.env.PORT ?? 3000), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/ (kerneld at ${kerneld})`);
});
