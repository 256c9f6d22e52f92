// verify.mjs checks that kerneld event logs are valid AG-UI 1.0 streams,
// using the protocol's own packages.
//
// Usage: node verify.mjs [--client VERSION] FILE...
//
// VERSION is the @ag-ui/client generation whose schemas and verifier
// judge (clients.mjs): 1.0.0, the default and the log's own protocol, or
// 0.0.59, for what the AG-UI route sends a client that predates 1.0.
//
// Each FILE holds a JSON array of kerneld wire events (the objects of the
// SSE data lines). Every event must pass @ag-ui/core's EventSchema, the whole
// array must pass @ag-ui/client's verifyEvents, and the array must keep
// kerneld's stream shape (DESIGN.md §4): it starts with RUN_STARTED; every
// run is closed by exactly one RUN_FINISHED or RUN_ERROR (a RUN_FINISHED
// naming the run's thread and run ids), with nothing between runs and no
// run left open at the end; a run closes only after its text messages,
// reasoning messages, reasoning spans and tool calls are closed, and every
// tool call has a TOOL_CALL_END and then a TOOL_CALL_RESULT; content deltas
// are not empty; metadata.kerneld.seq goes up by exactly 1 (the frames a
// ?snapshot=messages stream carries and the log does not have none: its
// MESSAGES_SNAPSHOT and, on an idle session, the RUN_STARTED and
// RUN_FINISHED around it, marked metadata.kerneld.snapshot).
//
// It prints "ok FILE (N events, R runs)" or "FAIL FILE: reasons" per file
// and exits 1 if any file failed.
import { readFileSync } from "node:fs";
import { from, lastValueFrom, toArray } from "rxjs";
import { loadClient } from "./clients.mjs";

const args = process.argv.slice(2);
const flag = args[0] === "--client" ? args.splice(0, 2)[1] : undefined;
const { EventSchema, verifyEvents } = await loadClient(flag);

const maxProblems = 10;

function label(i, ev) {
  return `event ${i} (${ev?.type ?? "no type"})`;
}

// schemaProblems validates each event on its own against EventSchema.
function schemaProblems(events) {
  const problems = [];
  events.forEach((ev, i) => {
    const r = EventSchema.safeParse(ev);
    if (r.success) return;
    const issues = r.error.issues.map((is) => {
      const note = is.note ? ` (${is.note})` : "";
      return `${is.path.join(".") || "(event)"}: ${is.message}${note}`;
    });
    problems.push(`${label(i, ev)}: schema: ${issues.join(", ")}`);
  });
  return problems;
}

// clientProblem runs the array through the client's stream verifier, which
// stops at the first error.
async function clientProblem(events) {
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
    return [];
  } catch (err) {
    return [`verifyEvents: ${err?.message ?? err}`];
  }
}

// shapeProblems checks the rules kerneld adds to AG-UI's own.
function shapeProblems(events) {
  const problems = [];
  let run = null; // the open run
  let runs = 0;
  let lastSeq;
  let outside = false; // reported once per stretch of events outside a run
  events.forEach((ev, i) => {
    const at = label(i, ev);
    if (typeof ev !== "object" || ev === null || Array.isArray(ev)) {
      problems.push(`${at}: not an object`);
      return;
    }
    const seq = ev.metadata?.kerneld?.seq;
    const presented = ev.type === "MESSAGES_SNAPSHOT" || ev.metadata?.kerneld?.snapshot === true;
    if (presented && seq === undefined) {
      // A ?snapshot=messages stream's snapshot, or the run carrying it:
      // not events of the log.
    } else if (!Number.isSafeInteger(seq)) {
      problems.push(`${at}: metadata.kerneld.seq is missing or not an integer`);
    } else {
      if (lastSeq !== undefined && seq !== lastSeq + 1) {
        problems.push(`${at}: seq ${seq} follows seq ${lastSeq}, want ${lastSeq + 1}`);
      }
      lastSeq = seq;
    }
    if (ev.type === "RUN_STARTED") {
      if (run) problems.push(`${at}: run ${ev.runId} starts while run ${run.runId} is open`);
      outside = false;
      run = { runId: ev.runId, threadId: ev.threadId, text: new Set(), reasoning: new Set(),
        spans: new Set(), calls: new Map() };
      runs++;
      return;
    }
    if (!run) {
      if (i === 0) problems.push(`${at}: the first event must be RUN_STARTED`);
      else if (!outside) problems.push(`${at}: outside a run`);
      outside = true;
      return;
    }
    const call = run.calls.get(ev.toolCallId);
    switch (ev.type) {
      case "TEXT_MESSAGE_START": run.text.add(ev.messageId); break;
      case "TEXT_MESSAGE_END": run.text.delete(ev.messageId); break;
      case "REASONING_START": run.spans.add(ev.messageId); break;
      case "REASONING_END": run.spans.delete(ev.messageId); break;
      case "REASONING_MESSAGE_START": run.reasoning.add(ev.messageId); break;
      case "REASONING_MESSAGE_END": run.reasoning.delete(ev.messageId); break;
      case "TEXT_MESSAGE_CONTENT":
      case "REASONING_MESSAGE_CONTENT":
        if (typeof ev.delta !== "string" || ev.delta === "") problems.push(`${at}: empty delta`);
        break;
      case "TOOL_CALL_START":
        run.calls.set(ev.toolCallId, { ended: false, result: false });
        break;
      case "TOOL_CALL_END":
        if (call) call.ended = true;
        break;
      case "TOOL_CALL_RESULT":
        if (call && !call.ended) problems.push(`${at}: result for tool call ${ev.toolCallId} before its TOOL_CALL_END`);
        if (call) call.result = true;
        break;
      case "RUN_FINISHED":
      case "RUN_ERROR":
        problems.push(...closeProblems(at, ev, run));
        run = null;
        break;
    }
  });
  if (run) problems.push(`the file ends with run ${run.runId} open (no RUN_FINISHED or RUN_ERROR)`);
  return { problems, runs };
}

// closeProblems lists what is still open when ev closes run.
function closeProblems(at, ev, run) {
  const open = [
    ...[...run.text].map((id) => `text message ${id} is still open`),
    ...[...run.reasoning].map((id) => `reasoning message ${id} is still open`),
    ...[...run.spans].map((id) => `reasoning span ${id} is still open`),
  ];
  for (const [id, c] of run.calls) {
    if (!c.ended) open.push(`tool call ${id} is still open (no TOOL_CALL_END)`);
    else if (!c.result && !ev.outcome?.pendingToolCallIds?.includes(id)) open.push(`tool call ${id} has no TOOL_CALL_RESULT`);
  }
  const problems = open.map((what) => `${at}: run ${run.runId} closes while ${what}`);
  if (ev.type === "RUN_FINISHED" && (ev.runId !== run.runId || ev.threadId !== run.threadId)) {
    problems.push(`${at}: closes thread ${ev.threadId} run ${ev.runId}, ` +
      `but RUN_STARTED opened thread ${run.threadId} run ${run.runId}`);
  }
  return problems;
}

async function check(file) {
  let events;
  try {
    events = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    return { problems: [`read: ${err.message}`] };
  }
  if (!Array.isArray(events)) return { problems: ["the file does not hold a JSON array"] };
  if (events.length === 0) return { problems: ["no events"] };
  const shape = shapeProblems(events);
  const problems = [...schemaProblems(events), ...(await clientProblem(events)), ...shape.problems];
  return { problems, count: events.length, runs: shape.runs };
}

const files = args;
if (files.length === 0) {
  console.error("usage: node verify.mjs [--client VERSION] FILE...");
  process.exit(2);
}
for (const file of files) {
  const { problems, count, runs } = await check(file);
  if (problems.length === 0) {
    console.log(`ok ${file} (${count} events, ${runs} runs)`);
    continue;
  }
  process.exitCode = 1;
  const more = problems.length > maxProblems ? `; and ${problems.length - maxProblems} more` : "";
  console.log(`FAIL ${file}: ${problems.slice(0, maxProblems).join("; ")}${more}`);
}
