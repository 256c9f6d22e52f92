// The Server-Sent Events wire format, read from a fetch() body: the
// session streams (stream.js) and the tenant's session feed (feed.js)
// both use it. fetch() rather than EventSource, because EventSource
// cannot send an Authorization header.

export const idleLimitMs = 45_000; // kerneld pings every 15 s: three missed pings mean the connection is dead

// readFrames parses body's SSE frames as they arrive and hands each to
// onFrame({id, event, data}) (data: the data lines joined), and a
// retry: hint to onRetry(ms). It returns when the body ends, the
// connection drops, or nothing (not even a ping) arrived for
// idleLimitMs, which aborts ctl.
export async function readFrames(body, ctl, { onFrame, onRetry = () => {} }) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let frame = newFrame();
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
          if (frame.data.length > 0) onFrame({ id: frame.id, event: frame.event, data: frame.data.join("\n") });
          frame = newFrame();
        } else {
          field(frame, line, onRetry);
        }
      }
    }
  } catch {
    // aborted, or the connection dropped: the caller reconnects
  } finally {
    clearTimeout(idle);
  }
}

const newFrame = () => ({ id: "", event: "", data: [] });

function field(frame, line, onRetry) {
  if (line.startsWith(":")) return; // a comment: kerneld's ping
  const colon = line.indexOf(":");
  const name = colon < 0 ? line : line.slice(0, colon);
  let value = colon < 0 ? "" : line.slice(colon + 1);
  if (value.startsWith(" ")) value = value.slice(1);
  if (name === "id") frame.id = value;
  else if (name === "event") frame.event = value;
  else if (name === "data") frame.data.push(value);
  else if (name === "retry" && /^\d+$/.test(value)) onRetry(Number(value));
}

// backoff is the pause before reconnect number failures (1, 2, ...):
// the first is quick (a dropped connection usually reconnects at once);
// then the server's retry: hint, doubling, bounded.
export function backoff(failures, retryMs, maxMs = 15_000) {
  return failures === 1 ? 500 : Math.min(retryMs * 2 ** (failures - 2), maxMs);
}

// keepReading calls readOnce(r) until it returns false (done) or
// r.close() is called, pausing between attempts: longer after each
// failure in a row, cut short when the browser comes back online.
// readOnce takes its AbortController from r.abortable(), sets r.retryMs
// from a retry: hint, and calls r.ok() once the connection works.
// onStatus hears "connecting" first and "ended" last.
//
// r.park() ends the connection without counting it a failure, and no
// other is made until r.unpark(): a reader that has nothing to wait for
// gives its connection back (see stream.js). readOnce sees r.parked.
export function keepReading(readOnce, onStatus) {
  let unparked = null;
  const r = {
    closed: false, parked: false, failures: 0, retryMs: 2000, controller: null, wake: null,
    abortable() { r.controller = new AbortController(); return r.controller; },
    ok() { r.failures = 0; },
    close() {
      r.closed = true;
      window.removeEventListener("online", onOnline);
      if (r.controller) r.controller.abort();
      if (r.wake) r.wake();
      if (unparked) unparked();
    },
    park() {
      if (r.parked || r.closed) return;
      r.parked = true;
      if (r.controller) r.controller.abort();
      if (r.wake) r.wake(); // a pause before reconnecting ends: there is no reconnecting
    },
    unpark() {
      if (!r.parked) return;
      r.parked = false;
      if (unparked) unparked();
    },
  };
  const onOnline = () => r.wake && r.wake();
  window.addEventListener("online", onOnline);
  const pause = (ms) => new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    r.wake = () => { clearTimeout(timer); resolve(); };
  });
  const untilUnparked = () => new Promise((resolve) => { unparked = resolve; });
  (async () => {
    onStatus("connecting");
    for (;;) {
      if (r.parked) {
        onStatus("parked");
        await untilUnparked();
        unparked = null;
      }
      if (r.closed || !(await readOnce(r)) || r.closed) break;
      if (r.parked) continue; // parked on purpose: no failure, no pause
      r.failures++;
      await pause(backoff(r.failures, r.retryMs));
    }
    window.removeEventListener("online", onOnline);
    if (!r.closed) onStatus("ended");
  })();
  return r;
}
