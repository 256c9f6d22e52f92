// httpagent.mjs drives kerneld's AG-UI route with the official HttpAgent,
// as a frontend would, and checks what the client ends up with.
//
// Usage: node httpagent.mjs BASE_URL KEY_A KEY_B
//
// KEY_A and KEY_B are API keys of two tenants. Every stream the agent
// receives must pass @ag-ui/core's EventSchema and @ag-ui/client's
// verifyEvents. Prints "ok NAME" or "FAIL NAME: reason" per scenario and
// exits 1 if any failed.
import { HttpAgent, verifyEvents } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";
import { randomUUID } from "node:crypto";
import { from, lastValueFrom, toArray } from "rxjs";

const [base, keyA, keyB] = process.argv.slice(2);

function agentFor(name, key, threadId) {
  return new HttpAgent({
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
  const events = [];
  await agent.runAgent({}, { onEvent: ({ event }) => void events.push(event) });
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

const scenarios = {
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
    console.log(`ok ${name}`);
  } catch (err) {
    failed = true;
    console.log(`FAIL ${name}: ${err?.stack ?? err}`);
  }
}
process.exit(failed ? 1 : 0);
