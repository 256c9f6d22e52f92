// A session's event stream, read with fetch() rather than EventSource:
// EventSource cannot send an Authorization header, and the console must
// work against a kerneld with API keys. fetch() can, and reading the body
// as a stream gives the same frames. The reader resumes by itself: after
// any drop (network, server restart, a proxy's idle timeout, the server
// dropping a slow reader) it reconnects with ?after=<last seq it handed
// on>, so the caller sees every event once, in order.
//
// A view can park its reader when it has nothing to wait for (the session
// is idle, and the session feed will say when that changes): the
// connection goes back to the browser, which allows only six per origin
// over HTTP/1.1, and wake() resumes after the last event handed on.

import { authHeaders, networkProblem, problemFrom } from "./api.js";
import { keepReading, readFrames } from "./sse.js";

// follow reads the events of session id, starting where query says
// ("after=SEQ", or a snapshot request), until close() is called or the
// server says there is nothing more to read. Callbacks:
//   onEvent(ev, seq)  each event, in seq order, each once;
//   onStatus(status)  "connecting", "live", "reconnecting", "parked" or "ended";
//   onProblem(p)      a refusal (a Problem): 401, 404, cursor_ahead, ...
export function follow(id, query, { onEvent, onStatus, onProblem }) {
  let lastSeq = -1; // nothing handed on yet: the first request uses query

  const url = () => {
    const cursor = lastSeq >= 0 ? `after=${lastSeq}` : query;
    return `/sessions/${encodeURIComponent(id)}/events${cursor ? `?${cursor}` : ""}`;
  };

  // readOnce makes one request and reads it to its end. It returns true
  // when reading should go on (the connection dropped), false when done.
  async function readOnce(r) {
    const controller = r.abortable();
    let res;
    try {
      res = await fetch(url(), { headers: { Accept: "text/event-stream", ...authHeaders() }, signal: controller.signal, cache: "no-store" });
    } catch (err) {
      if (!r.closed && !r.parked) onStatus("reconnecting", networkProblem(err));
      return !r.closed;
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
    await readFrames(res.body, controller, { onFrame: (f) => dispatch(r, f), onRetry: (ms) => { r.retryMs = ms; } });
    if (!r.closed && !r.parked) onStatus("reconnecting");
    return !r.closed;
  }

  function dispatch(r, frame) {
    if (r.closed) return;
    const seq = Number(frame.id);
    let ev;
    try {
      ev = JSON.parse(frame.data);
    } catch {
      return; // not an event kerneld sends
    }
    // A snapshot, and the run an idle session's comes in, have no seq of
    // their own: their id repeats the event's before them.
    const presented = ev.type === "MESSAGES_SNAPSHOT" || Boolean(ev.metadata && ev.metadata.kerneld && ev.metadata.kerneld.snapshot);
    const handedOn = presented ? seq < lastSeq : seq <= lastSeq;
    if (frame.id !== "" && handedOn) return;
    if (frame.id !== "") lastSeq = seq;
    r.ok(); // the connection works: a drop after it reconnects at once
    onEvent(ev, seq);
  }

  const r = keepReading(readOnce, onStatus);
  return {
    close: () => r.close(),
    park: () => r.park(),
    wake: () => r.unpark(),
    parked: () => r.parked,
    lastSeq: () => lastSeq,
  };
}
