// chat.mjs drives kerneld's AI SDK route with the real `ai` package, as a
// useChat app would: DefaultChatTransport sends and reconnects,
// readUIMessageStream folds the UI message stream into a UIMessage, and
// every transcript kerneld gives back must pass validateUIMessages.
//
// Usage: node chat.mjs BASE_URL KEY_A KEY_B
//
// KEY_A and KEY_B are API keys of two tenants. Prints "ok NAME" or
// "FAIL NAME: reason" per scenario, then "N passed, N failed", and exits 1
// if any failed.
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
  validateUIMessages,
} from "ai";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";

const [base, keyA, keyB] = process.argv.slice(2);

function transport(agent, key) {
  return new DefaultChatTransport({
    api: `${base}/agents/${agent}/ai-sdk`,
    headers: { Authorization: `Bearer ${key}` },
  });
}

function user(text) {
  return { id: randomUUID(), role: "user", parts: [{ type: "text", text }] };
}

// send posts messages and folds the answer; message continues an answer.
async function send(t, chatId, messages, { message, trigger = "submit-message", messageId } = {}) {
  const stream = await t.sendMessages({ chatId, messages, trigger, messageId, abortSignal: undefined });
  return fold(stream, message);
}

// fold reads a UI message stream to its end and returns the last state of
// the message and the errors the stream reported.
async function fold(stream, message) {
  const errors = [];
  let last;
  for await (const m of readUIMessageStream({ stream, message, onError: (e) => errors.push(e) })) {
    last = m;
  }
  return { message: structuredClone(last), errors };
}

const textOf = (m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join("|");
const toolParts = (m) => m.parts.filter((p) => p.type.startsWith("tool-"));

async function transcript(key, sessionId) {
  const res = await fetch(`${base}/sessions/${sessionId}/transcript`, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200, `GET /sessions/${sessionId}/transcript: ${res.status}`);
  const messages = await res.json();
  await validateUIMessages({ messages });
  return messages;
}

// sameChat checks that kerneld's transcript says what the client holds:
// the same messages, ids, text and tool states.
function sameChat(got, want) {
  const view = (ms) => ms.map((m) => ({ id: m.id, role: m.role, text: textOf(m), tools: toolParts(m).map((p) => `${p.type}:${p.state}`) }));
  assert.deepEqual(view(got), view(want));
}

// waitIdle polls reconnectToStream until no run of the chat is active.
async function waitIdle(t, chatId) {
  for (let i = 0; i < 500; i++) {
    const stream = await t.reconnectToStream({ chatId });
    if (stream == null) return;
    await fold(stream);
  }
  throw new Error(`chat ${chatId} never became idle`);
}

const scenarios = {
  async "two turns on one chat id, no doubled input"() {
    const t = transport("echo", keyA);
    const chatId = randomUUID();
    const messages = [user("hello there")];
    let { message } = await send(t, chatId, messages);
    assert.equal(message.id, `answer:${messages[0].id}`);
    assert.equal(textOf(message), "hello there");
    messages.push(message, user("and again"));
    ({ message } = await send(t, chatId, messages));
    assert.equal(textOf(message), "and again");
    assert.equal(message.metadata.sessionId, chatId);
    assert.ok(message.metadata.usage, "no usage on finish");
    messages.push(message);
    sameChat(await transcript(keyA, chatId), messages);
  },

  async "a tool call with its input and output"() {
    const t = transport("tooluser", keyA);
    const chatId = randomUUID();
    const messages = [user("what time is it?")];
    const { message } = await send(t, chatId, messages);
    const [call] = toolParts(message);
    assert.equal(call.type, "tool-current_time");
    assert.equal(call.state, "output-available");
    assert.deepEqual(call.input, { timezone: "UTC" });
    assert.ok(call.output, "no output");
    assert.equal(textOf(message), "Checking the time.|Done.");
    assert.equal(message.parts.filter((p) => p.type === "step-start").length, 2);
    messages.push(message);
    sameChat(await transcript(keyA, chatId), messages);
  },

  async "an approval requested, answered through the next request"() {
    const t = transport("approver", keyA);
    const chatId = randomUUID();
    const messages = [user("buy milk")];
    let { message } = await send(t, chatId, messages);
    let [call] = toolParts(message);
    assert.equal(call.state, "approval-requested");
    assert.equal(call.approval.id, call.toolCallId);
    messages.push(message);
    sameChat(await transcript(keyA, chatId), messages);
    // What addToolApprovalResponse does to the part:
    call.state = "approval-responded";
    call.approval = { ...call.approval, approved: true, reason: "fine" };
    assert.ok(lastAssistantMessageIsCompleteWithApprovalResponses({ messages }), "useChat would not send the answer");
    ({ message } = await send(t, chatId, messages, { message, messageId: message.id }));
    [call] = toolParts(message);
    assert.equal(call.state, "output-available");
    assert.equal(call.approval.approved, true);
    assert.equal(textOf(message), "Saving.|Saved.");
    messages[1] = message;
    sameChat(await transcript(keyA, chatId), messages);
  },

  async "a denied approval"() {
    const t = transport("approver", keyA);
    const chatId = randomUUID();
    const messages = [user("buy milk")];
    let { message } = await send(t, chatId, messages);
    const [call] = toolParts(message);
    call.state = "approval-responded";
    call.approval = { ...call.approval, approved: false, reason: "not today" };
    messages.push(message);
    ({ message } = await send(t, chatId, messages, { message, messageId: message.id }));
    assert.equal(toolParts(message)[0].state, "output-denied");
    messages[1] = message;
    sameChat(await transcript(keyA, chatId), messages);
  },

  async "reconnectToStream mid-answer resumes without gap or duplicate"() {
    const t = transport("slow", keyA);
    const chatId = randomUUID();
    const abort = new AbortController();
    const stream = await t.sendMessages({ chatId, messages: [user("go")], trigger: "submit-message", abortSignal: abort.signal });
    const reader = stream.getReader();
    let deltas = 0;
    while (deltas < 3) {
      const { value, done } = await reader.read();
      assert.ok(!done, "the answer ended before it was cut");
      if (value.type === "text-delta") deltas++;
    }
    abort.abort(); // the page goes away mid-answer
    await reader.cancel().catch(() => {});
    const resumed = await t.reconnectToStream({ chatId });
    assert.ok(resumed, "no active stream to resume");
    const { message } = await fold(resumed);
    assert.equal(textOf(message), "a b c d e f g h i j k l m n o p q r s t u v w x y z");
    assert.equal(await t.reconnectToStream({ chatId }), null, "a finished chat still streams");
  },

  async "regenerate answers again and the chat goes on"() {
    const t = transport("echo", keyA);
    const chatId = randomUUID();
    const messages = [user("once more")];
    let { message } = await send(t, chatId, messages);
    ({ message } = await send(t, chatId, messages, { trigger: "regenerate-message", messageId: message.id }));
    assert.equal(message.id, `answer:${messages[0].id}`);
    assert.equal(textOf(message), "once more");
    const fork = message.metadata.sessionId;
    assert.notEqual(fork, chatId, "the regenerated answer is not in a fork");
    messages.push(message, user("next"));
    ({ message } = await send(t, chatId, messages));
    assert.equal(textOf(message), "next");
    assert.equal(message.metadata.sessionId, fork);
    messages.push(message);
    sameChat(await transcript(keyA, fork), messages);
  },

  async "a stream cut mid-answer loses nothing"() {
    const t = transport("slow", keyA);
    const chatId = randomUUID();
    const abort = new AbortController();
    const messages = [user("go")];
    const stream = await t.sendMessages({ chatId, messages, trigger: "submit-message", abortSignal: abort.signal });
    const reader = stream.getReader();
    await reader.read();
    abort.abort();
    await reader.cancel().catch(() => {});
    await waitIdle(t, chatId);
    const got = await transcript(keyA, chatId);
    assert.equal(got.length, 2);
    assert.equal(textOf(got[1]), "a b c d e f g h i j k l m n o p q r s t u v w x y z");
  },

  async "a failing run is an error chunk"() {
    const t = transport("failing", keyA);
    const chatId = randomUUID();
    const messages = [user("go")];
    const { message, errors } = await send(t, chatId, messages);
    assert.equal(errors.length, 1, "no error reported");
    assert.match(String(errors[0].message), /model overloaded/);
    assert.equal(textOf(message), "one two");
    await transcript(keyA, chatId);
  },

  async "chat ids are the tenant's own"() {
    const chatId = randomUUID();
    const a = await send(transport("echo", keyA), chatId, [user("from a")]);
    const b = await send(transport("tooluser", keyB), chatId, [user("from b")]);
    assert.equal(textOf(a.message), "from a");
    assert.equal(textOf(b.message), "Checking the time.|Done.");
    const ta = await transcript(keyA, chatId);
    const tb = await transcript(keyB, chatId);
    assert.equal(textOf(ta[0]), "from a");
    assert.equal(textOf(tb[0]), "from b");
    assert.equal(await transport("tooluser", keyA).reconnectToStream({ chatId: randomUUID() }), null);
  },
};

let passed = 0;
let failed = 0;
for (const [name, run] of Object.entries(scenarios)) {
  try {
    await run();
    console.log(`ok ${name}`);
    passed++;
  } catch (e) {
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
    failed++;
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
