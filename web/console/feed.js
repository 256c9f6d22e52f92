// The tenant's session feed (GET /sessions/events): what the sidebar and
// the inbox count show, kept current by kerneld pushing each change, not
// by polling. The reader starts with a snapshot of the first page of
// sessions and resumes after any drop with Last-Event-ID, so it sees
// every change once, in order; kerneld answers a cursor it no longer
// keeps with a fresh snapshot.

import { authHeaders, networkProblem, problemFrom } from "./api.js";
import { keepReading, readFrames } from "./sse.js";

// followFeed reads the feed of the sessions of agent ("" for all) until
// close(). Callbacks:
//   onSnapshot(summaries)  the sessions as they are now (first, and again
//                          whenever kerneld starts the reader over);
//   onChange(ev)           one change: {type, seq, time, session};
//   onStatus(status, p)    "connecting", "live", "reconnecting" or "ended";
//   onProblem(p)           a refusal that retrying cannot change (401, 503 feed_unavailable).
export function followFeed(agent, { onSnapshot, onChange, onStatus, onProblem }) {
  let lastSeq = -1; // nothing read yet: the first request asks for a snapshot

  const url = () => {
    const q = new URLSearchParams();
    if (lastSeq < 0) q.set("snapshot", "true");
    if (agent) q.set("agent", agent);
    const qs = q.toString();
    return `/sessions/events${qs ? `?${qs}` : ""}`;
  };

  // readOnce makes one request and reads it to its end; it returns true
  // when reading should go on.
  async function readOnce(r) {
    const controller = r.abortable();
    const headers = { Accept: "text/event-stream", ...authHeaders() };
    if (lastSeq >= 0) headers["Last-Event-ID"] = String(lastSeq);
    let res;
    try {
      res = await fetch(url(), { headers, signal: controller.signal, cache: "no-store" });
    } catch (err) {
      if (!r.closed) onStatus("reconnecting", networkProblem(err));
      return !r.closed;
    }
    if (!res.ok) {
      const p = await problemFrom(res);
      if (p.code === "cursor_ahead") {
        lastSeq = -1; // the store was reset under us: start over from a snapshot
        return true;
      }
      if (res.status === 429 || (res.status >= 500 && p.code !== "feed_unavailable")) {
        onStatus("reconnecting", p);
        return true;
      }
      onProblem(p);
      return false;
    }
    r.ok();
    onStatus("live");
    await readFrames(res.body, controller, { onFrame: (f) => dispatch(r, f), onRetry: (ms) => { r.retryMs = ms; } });
    if (!r.closed) onStatus("reconnecting");
    return !r.closed;
  }

  function dispatch(r, frame) {
    if (r.closed) return;
    let data;
    try {
      data = JSON.parse(frame.data);
    } catch {
      return; // not a frame kerneld sends
    }
    const seq = Number(frame.id);
    if (data.type === "snapshot") {
      lastSeq = seq;
      onSnapshot(data.data || []);
      return;
    }
    if (frame.id !== "" && seq <= lastSeq) return; // already seen
    lastSeq = seq;
    onChange(data);
  }

  const r = keepReading(readOnce, onStatus);
  return { close: () => r.close() };
}
