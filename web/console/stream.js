// A session's event stream, read with fetch() rather than EventSource:
// EventSource cannot send an Authorization header, and the console must
// work against a kerneld with API keys. fetch() can, and reading the body
// as a stream gives the same frames. The reader resumes by itself: after
// any drop (network, server restart, a proxy's idle timeout, the server
// dropping a slow reader) it reconnects with ?after=<last seq it handed
// on>, so the caller sees every event once, in order.

import { authHeaders, networkProblem, problemFrom } from "./api.js";

const idleLimitMs = 45_000; // kerneld pings every 15 s: three missed pings mean the connection is dead
const maxBackoffMs = 15_000;

// follow reads the events of session id, starting where query says
// ("after=SEQ", or a snapshot request), until close() is called or the
// server says there is nothing more to read. Callbacks:
//   onEvent(ev, seq)  each event, in seq order, each once;
//   onStatus(status)  "connecting", "live", "reconnecting" or "ended";
//   onProblem(p)      a refusal (a Problem): 401, 404, cursor_ahead, ...
export function follow(id, query, { onEvent, onStatus, onProblem }) {
  let lastSeq = -1; // nothing handed on yet: the first request uses query
  let retryMs = 2000;
  let failures = 0;
  let closed = false;
  let controller = null;
  let wake = null; // resolves the pause before a reconnect early

  const url = () => {
    const cursor = lastSeq >= 0 ? `after=${lastSeq}` : query;
    return `/sessions/${encodeURIComponent(id)}/events${cursor ? `?${cursor}` : ""}`;
  };

  const pause = (ms) => new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    wake = () => { clearTimeout(timer); resolve(); };
  });
  const onOnline = () => wake && wake();
  window.addEventListener("online", onOnline);

  // readOnce makes one request and reads it to its end. It returns true
  // when reading should go on (the connection dropped), false when done.
  async function readOnce() {
    controller = new AbortController();
    let res;
    try {
      res = await fetch(url(), { headers: { Accept: "text/event-stream", ...authHeaders() }, signal: controller.signal, cache: "no-store" });
    } catch (err) {
      if (!closed) onStatus("reconnecting", networkProblem(err));
      return !closed;
    }
    if (res.status === 204) return false; // a closed session with nothing more to send
    if (!res.ok) {
      const p = await problemFrom(res);
      const transient = res.status === 429 || res.status >= 500;
      if (transient) {
        onStatus("reconnecting", p);
        return true;
      }
      onProblem(p);
      return false;
    }
    onStatus("live");
    await readFrames(res.body, controller);
    if (!closed) onStatus("reconnecting");
    return !closed;
  }

  // readFrames parses SSE frames as they arrive and hands on their events.
  async function readFrames(body, ctl) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    let frame = { id: "", event: "", data: [] };
    let idle = setTimeout(() => ctl.abort(), idleLimitMs);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        clearTimeout(idle);
        idle = setTimeout(() => ctl.abort(), idleLimitMs);
        buf += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, "");
          buf = buf.slice(nl + 1);
          if (line === "") {
            dispatch(frame);
            frame = { id: "", event: "", data: [] };
          } else {
            field(frame, line);
          }
        }
      }
    } catch {
      // aborted, or the connection dropped: the caller reconnects
    } finally {
      clearTimeout(idle);
    }
  }

  function field(frame, line) {
    if (line.startsWith(":")) return; // a comment: kerneld's ping
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "id") frame.id = value;
    else if (name === "event") frame.event = value;
    else if (name === "data") frame.data.push(value);
    else if (name === "retry" && /^\d+$/.test(value)) retryMs = Number(value);
  }

  function dispatch(frame) {
    if (frame.data.length === 0 || closed) return;
    const seq = Number(frame.id);
    let ev;
    try {
      ev = JSON.parse(frame.data.join("\n"));
    } catch {
      return; // not an event kerneld sends
    }
    // A snapshot, and the run an idle session's comes in, have no seq of
    // their own: their id repeats the event's before them.
    const presented = ev.type === "MESSAGES_SNAPSHOT" || Boolean(ev.metadata && ev.metadata.kerneld && ev.metadata.kerneld.snapshot);
    const handedOn = presented ? seq < lastSeq : seq <= lastSeq;
    if (frame.id !== "" && handedOn) return;
    if (frame.id !== "") lastSeq = seq;
    failures = 0; // the connection works: a drop after it reconnects at once
    onEvent(ev, seq);
  }

  (async () => {
    onStatus("connecting");
    while (!closed && await readOnce()) {
      failures++;
      // The first retry is quick (a dropped connection usually reconnects
      // at once); then the server's retry: hint, doubling, bounded.
      await pause(failures === 1 ? 500 : Math.min(retryMs * 2 ** (failures - 2), maxBackoffMs));
    }
    window.removeEventListener("online", onOnline);
    if (!closed) onStatus("ended");
  })();

  return {
    close() {
      closed = true;
      window.removeEventListener("online", onOnline);
      if (controller) controller.abort();
      if (wake) wake();
    },
  };
}
