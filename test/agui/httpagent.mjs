// httpagent.mjs drives kerneld's AG-UI route with the official HttpAgent,
// as a frontend would, and checks what the client ends up with.
//
// Usage: node httpagent.mjs BASE_URL KEY_A KEY_B [CLIENT_VERSION]
//
// KEY_A and KEY_B are API keys of two tenants. CLIENT_VERSION is the
// @ag-ui/client generation to drive (clients.mjs): 1.0.0, the default, or
// 0.0.59, the one CopilotKit pins. Every stream the agent receives must
// pass that generation's EventSchema and verifyEvents. Prints "ok NAME"
// or "FAIL NAME: reason" per scenario and exits 1 if any failed.
import { randomUUID } from "node:crypto";
import { from, lastValueFrom, toArray } from "rxjs";
import { loadClient } from "./clients.mjs";

const [base, keyA, keyB, clientVersion] = process.argv.slice(2);
const { HttpAgent, verifyEvents, EventSchema, version } = await loadClient(clientVersion);

// RecordingAgent is HttpAgent keeping the body of its last request, so a
// scenario can send it again as a retrying client would.
class RecordingAgent extends HttpAgent {
  requestInit(input) {
    const init = super.requestInit(input);
    this.lastBody = init.body;
    return init;
  }
}

function agentFor(name, key, threadId) {
  return new RecordingAgent({
    url: `${base}/agents/${name}/agui`,
    threadId,
    headers: { Authorization: `Bearer ${key}` },
  });
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// run adds a user message and runs the agent, checking the stream.
async function run(agent, text) {
  agent.addMessage({ id: randomUUID(), role: "user", content: text });
  return runChecked(agent, {});
}

// runChecked runs the agent with params and checks the stream: every event
// passes EventSchema, and the whole passes verifyEvents as one run.
async function runChecked(agent, params) {
  const events = [];
  await agent.runAgent(params, { onEvent: ({ event }) => void events.push(event) });
  for (const ev of events) {
    const r = EventSchema.safeParse(ev);
    check(r.success, `${ev.type} fails EventSchema: ${r.error?.message}`);
  }
  await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
  check(events[0]?.type === "RUN_STARTED" && events.at(-1)?.type === "RUN_FINISHED", "the stream is not one run");
  return events;
}

async function getSession(key, id) {
  const res = await fetch(`${base}/sessions/${id}`, { headers: { Authorization: `Bearer ${key}` } });
  check(res.ok, `GET /sessions/${id}: ${res.status}`);
  return res.json();
}

// interrupted asks agent "gated" to save two values, which needs two
// approvals: the run ends with an interrupt outcome naming both calls.
async function interrupted(agent) {
  const events = await run(agent, "save a and b");
  const outcome = events.at(-1).outcome;
  check(outcome?.type === "interrupt", `the run ended with ${JSON.stringify(outcome)}`);
  check(outcome.interrupts.length === 2, `${outcome.interrupts.length} interrupts`);
  for (const i of outcome.interrupts) {
    check(i.reason === "tool_approval" && i.toolCallId && i.id && i.expiresAt && i.responseSchema, `interrupt ${JSON.stringify(i)}`);
  }
  check(agent.pendingInterrupts.length === 2, "the client holds no pending interrupts");
  return outcome.interrupts;
}

// answer resumes agent's interrupts, each with entry(interrupt), and
// returns the continuation's events, which must finish the run. runId is
// the continuation's: a new one by default, as AG-UI's own example does.
async function answer(agent, interrupts, entry, runId = randomUUID()) {
  const events = await runChecked(agent, { runId, resume: interrupts.map((i) => ({ interruptId: i.id, ...entry })) });
  check(events[0].runId === runId && events.at(-1).runId === runId, "the continuation is not the client's run");
  check((events.at(-1).outcome?.type ?? "success") === "success", `the continuation ended ${JSON.stringify(events.at(-1).outcome)}`);
  check(agent.pendingInterrupts.length === 0, "interrupts still pending");
  return events;
}

// toolResults returns the content of the TOOL_CALL_RESULTs in events.
const toolResults = (events) => events.filter((e) => e.type === "TOOL_CALL_RESULT").map((e) => e.content);

const pageTitle = {
  name: "page_title",
  description: "Reads the title of the page the user is on.",
  parameters: { type: "object", properties: { selector: { type: "string" } } },
};

// readSnapshot reads what a reloaded page starts from: the first run of
// GET /sessions/{id}/events?snapshot=messages, which on an idle thread is
// a MESSAGES_SNAPSHOT in a run of its own. It returns the run's events.
async function readSnapshot(key, id) {
  const stop = new AbortController();
  const res = await fetch(`${base}/sessions/${id}/events?snapshot=messages`, {
    headers: { Authorization: `Bearer ${key}`, Accept: "text/event-stream" },
    signal: stop.signal,
  });
  check(res.ok, `GET /sessions/${id}/events?snapshot=messages: ${res.status}`);
  const decoder = new TextDecoder();
  const events = [];
  let text = "";
  try {
    for await (const chunk of res.body) {
      text += decoder.decode(chunk, { stream: true });
      const frames = text.split("\n\n");
      text = frames.pop();
      for (const frame of frames) {
        const data = frame.split("\n").find((l) => l.startsWith("data: "));
        if (!data) continue;
        const ev = JSON.parse(data.slice("data: ".length));
        events.push(ev);
        if (ev.type === "RUN_FINISHED" || ev.type === "RUN_ERROR") return events;
      }
    }
  } finally {
    stop.abort();
  }
  throw new Error(`the stream ended without a whole run: ${events.map((e) => e.type).join()}`);
}

const scenarios = {
  async "client-side tool round trip"() {
    const agent = agentFor("frontend", keyA, randomUUID());
    agent.addMessage({ id: randomUUID(), role: "user", content: "what page am I on?" });
    let events = await runChecked(agent, { tools: [pageTitle] });
    check((events.at(-1).outcome?.type ?? "success") === "success", `the run ended ${JSON.stringify(events.at(-1).outcome)}`);
    const start = events.find((e) => e.type === "TOOL_CALL_START");
    check(start?.toolCallName === "page_title", "no call of the client tool");
    check(events.some((e) => e.type === "TOOL_CALL_END" && e.toolCallId === start.toolCallId), "the call never ended");
    check(!events.some((e) => e.type === "TOOL_CALL_RESULT"), "kerneld answered the client's tool");
    const call = agent.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === start.toolCallId);
    check(JSON.parse(call.function.arguments).selector === "h1", `arguments ${call.function.arguments}`);
    const resultId = randomUUID();
    agent.addMessage({ id: resultId, role: "tool", toolCallId: start.toolCallId, content: "Settings" });
    events = await runChecked(agent, { tools: [pageTitle] });
    check(agent.messages.at(-1).content === "Got it.", `the answer reads ${agent.messages.at(-1).content}`);
    check(agent.messages.filter((m) => m.id === resultId).length === 1, "the tool message is doubled");
    const res = await fetch(`${base}/sessions/${agent.threadId}/messages`, { headers: { Authorization: `Bearer ${keyA}` } });
    const stored = (await res.json()).data;
    const tool = stored.find((m) => m.role === "tool");
    check(tool?.id === resultId && tool.tool_call_id === start.toolCallId && tool.content === "Settings", `stored ${JSON.stringify(tool)}`);
  },
  async "approval: interrupt, resume approve"() {
    const agent = agentFor("gated", keyA, randomUUID());
    const interrupts = await interrupted(agent);
    const events = await answer(agent, interrupts, { status: "resolved", payload: { decision: "approve" } });
    const results = toolResults(events);
    check(results.filter((c) => !c.startsWith("denied")).length >= 2, `results ${results}`);
    check(agent.messages.at(-1).role === "assistant" && agent.messages.at(-1).content === "Done.", "no final answer");
  },
  async "approval: interrupt, resume cancelled denies"() {
    const agent = agentFor("gated", keyA, randomUUID());
    const interrupts = await interrupted(agent);
    const events = await answer(agent, interrupts, { status: "cancelled" });
    const denied = toolResults(events).filter((c) => c.startsWith("denied"));
    check(denied.length === 2, `results ${toolResults(events)}`);
    const approvals = await (await fetch(`${base}/sessions/${agent.threadId}/runs/${events.at(-1).metadata.kerneld.runId}/approvals`, {
      headers: { Authorization: `Bearer ${keyA}` },
    })).json();
    check(approvals.data?.every((a) => a.state === "denied"), `approvals ${JSON.stringify(approvals)}`);
  },
  async "approval: resume under the interrupted runId, then again: 409"() {
    // CopilotKit's useInterrupt answers under the runId of the run that
    // ended on the interrupt.
    const agent = agentFor("gated", keyA, randomUUID());
    const runId = randomUUID();
    agent.addMessage({ id: randomUUID(), role: "user", content: "save a and b" });
    const first = await runChecked(agent, { runId });
    const interrupts = first.at(-1).outcome.interrupts;
    const events = await answer(agent, interrupts, { status: "resolved", payload: { decision: "approve" } }, runId);
    check(toolResults(events).filter((c) => !c.startsWith("denied")).length >= 2, `results ${toolResults(events)}`);
    const body = agent.lastBody;
    check(JSON.parse(body).resume?.length === 2, "the client sent no resume");
    // The same answer again, as a client retrying it would send it.
    const res = await fetch(agent.url, { method: "POST", headers: { ...agent.headers, "Content-Type": "application/json" }, body });
    const problem = await res.json();
    check(res.status === 409 && problem.code === "interrupt_not_pending", `the repeated answer got ${res.status} ${JSON.stringify(problem)}`);
    check(res.headers.get("Idempotent-Replayed") === null, "the repeated answer was replayed");
  },
  async "snapshot on reload"() {
    const thread = randomUUID();
    await run(agentFor("echo", keyA, thread), "before the reload");
    // A reloaded page knows the thread id only; kerneld has the history,
    // which the idle thread's stream starts with, inside a run.
    const events = await readSnapshot(keyA, thread);
    const types = events.map((e) => e.type).join();
    check(types === "RUN_STARTED,MESSAGES_SNAPSHOT,RUN_FINISHED", `the snapshot stream starts ${types}`);
    for (const ev of events) {
      const parsed = EventSchema.safeParse(ev);
      check(parsed.success, `${ev.type} fails EventSchema: ${parsed.error?.message}`);
    }
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
    const snapshot = events[1];
    const page = agentFor("echo", keyA, thread);
    page.setMessages(snapshot.messages);
    await run(page, "after the reload");
    const roles = page.messages.map((m) => m.role).join();
    check(roles === "user,assistant,user,assistant", `messages are ${roles}`);
    check(page.messages[1].content === "before the reload", `the restored answer reads ${page.messages[1].content}`);
    const res = await fetch(`${base}/sessions/${thread}/messages`, { headers: { Authorization: `Bearer ${keyA}` } });
    const stored = (await res.json()).data;
    check(stored.map((m) => m.id).join() === page.messages.map((m) => m.id).join(), "kerneld's history and the page's differ");
  },
  async "a run cancelled by someone else ends as this client understands it"() {
    // 1.0 has a cancelled outcome; 0.0.x has none and gets RUN_ERROR
    // code "cancelled", since its HttpAgent refuses outcomes it lacks.
    const agent = agentFor("waiter", keyA, randomUUID());
    agent.addMessage({ id: randomUUID(), role: "user", content: "wait" });
    const events = [];
    let cancelled;
    const onEvent = ({ event }) => {
      events.push(event);
      if (event.type === "TOOL_CALL_END" && !cancelled) {
        const runId = events[0].metadata.kerneld.runId;
        cancelled = fetch(`${base}/sessions/${agent.threadId}/runs/${runId}/cancel`, {
          method: "POST", headers: { Authorization: `Bearer ${keyA}` },
        });
      }
    };
    await agent.runAgent({}, { onEvent }).catch(() => {}); // a RUN_ERROR rejects in 0.0.x
    check((await cancelled)?.ok, "the cancel failed");
    for (const ev of events) {
      const r = EventSchema.safeParse(ev);
      check(r.success, `${ev.type} fails EventSchema: ${r.error?.message}`);
    }
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
    const end = events.at(-1);
    const want = version === "0.0.59" ? end.type === "RUN_ERROR" && end.code === "cancelled"
      : end.type === "RUN_FINISHED" && end.outcome?.type === "cancelled";
    check(want, `the run ended with ${JSON.stringify(end)}`);
  },
  async "two turns on one thread"() {
    const thread = randomUUID();
    const agent = agentFor("echo", keyA, thread);
    await run(agent, "hello there");
    await run(agent, "and again");
    const roles = agent.messages.map((m) => m.role);
    check(JSON.stringify(roles) === JSON.stringify(["user", "assistant", "user", "assistant"]), `messages are ${roles}`);
    check(agent.messages[0].content === "hello there", `the first user message reads ${agent.messages[0].content}`);
    check(agent.messages[3].content.includes("and again"), `the answer reads ${agent.messages[3].content}`);
    const res = await fetch(`${base}/sessions/${thread}/messages`, { headers: { Authorization: `Bearer ${keyA}` } });
    const stored = (await res.json()).data;
    check(stored.map((m) => m.id).join() === agent.messages.map((m) => m.id).join(), "kerneld's history and the client's differ");
  },
  async "state comes back as a snapshot"() {
    const agent = agentFor("echo", keyA, randomUUID());
    agent.setState({ page: "settings" });
    const events = await run(agent, "hi");
    check(events.some((e) => e.type === "STATE_SNAPSHOT" && e.snapshot.page === "settings"), "no STATE_SNAPSHOT");
  },
  async "one thread id, two tenants"() {
    const thread = `shared-${randomUUID()}`;
    await run(agentFor("echo", keyA, thread), "from a");
    await run(agentFor("tooluser", keyB, thread), "from b");
    check((await getSession(keyA, thread)).agent === "echo", "tenant a's thread changed");
    check((await getSession(keyB, thread)).agent === "tooluser", "tenant b got tenant a's thread");
  },
};

let failed = false;
for (const [name, fn] of Object.entries(scenarios)) {
  try {
    await fn();
    console.log(`ok ${name} (@ag-ui/client ${version})`);
  } catch (err) {
    failed = true;
    console.log(`FAIL ${name} (@ag-ui/client ${version}): ${err?.stack ?? err}`);
  }
}
process.exit(failed ? 1 : 0);
