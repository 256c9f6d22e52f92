// The tenant's session feed (GET /sessions/events): what the sidebar and
// the inbox count show, kept current by kerneld pushing each change, not
// by polling. The reader starts with a snapshot of the first page of
// sessions and resumes after any drop with Last-Event-ID, so it sees
// every change once, in order; kerneld answers a cursor it no longer
// keeps with a fresh snapshot.
//
// The tabs of one browser share one feed. Over HTTP/1.1 a browser opens
// at most six connections to one origin, and a feed read is one held
// open for as long as the tab lives: with one per tab, a few tabs would
// take every connection and the console's requests would wait forever.
// So the tabs that read the same feed (the same API key and agent
// filter) elect one of them, through a Web Lock, to read it; it hands
// every frame to the others over a BroadcastChannel. When that tab
// closes, the lock passes to another, which resumes the feed after the
// last change any of them was handed (Last-Event-ID): nothing is missed
// or doubled. A browser without Web Locks (a page served over plain
// HTTP from another host than localhost) reads one feed per tab.

import { Problem, apiKey, authHeaders, networkProblem, problemFrom } from "./api.js";
import { keepReading, readFrames } from "./sse.js";

// followFeed reads the feed of the sessions of agent ("" for all) until
// close(). Callbacks:
//   onSnapshot(summaries)  the sessions as they are now (first, and again
//                          whenever kerneld starts the reader over);
//   onChange(ev)           one change: {type, seq, time, session};
//   onStatus(status, p)    "connecting", "live", "reconnecting" or "ended";
//   onProblem(p)           a refusal that retrying cannot change (401, 503 feed_unavailable).
export function followFeed(agent, callbacks) {
  if (canShare()) return shareFeed(agent, callbacks);
  const feed = readFeed(agent, -1, { ...callbacks, onSnapshot: (list) => callbacks.onSnapshot(list) });
  return { close: feed.close };
}

// canShare reports whether this browser lets tabs share the feed: Web
// Locks and a hash for the key need a secure context (https, or
// localhost).
const canShare = () => Boolean(navigator.locks && window.BroadcastChannel && crypto.subtle);

// readFeed reads the feed itself, resuming after seq lastSeq (-1: from
// a snapshot). onSnapshot hears (summaries, seq).
function readFeed(agent, lastSeq, { onSnapshot, onChange, onStatus, onProblem }) {
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
      onSnapshot(data.data || [], seq);
      return;
    }
    if (frame.id !== "" && seq <= lastSeq) return; // already seen
    lastSeq = seq;
    onChange(data);
  }

  const r = keepReading(readOnce, onStatus);
  return { close: () => r.close() };
}

// shareFeed follows the feed with the other tabs that read the same one:
// the tab holding the group's lock reads it and posts what it reads;
// every tab (the reader too) hands on what it hears to its callbacks,
// and keeps the sessions as they stand, to answer a tab that joins and
// to go on from where the group was should it become the reader.
function shareFeed(agent, { onSnapshot, onChange, onStatus, onProblem }) {
  const tab = Math.random().toString(36).slice(2);
  let lastSeq = -1; // the last change this tab was handed; -1: none yet
  let status = null; // the reader's last status message
  let sessions = new Map(); // id → summary, as the feed stands at lastSeq
  let channel = null;
  let reader = null; // the feed this tab reads, while it holds the lock
  let stopLeading = null;
  let closed = false;
  const waiting = new AbortController(); // cancels the request for the lock

  // take applies a message, whether this tab read it or another posted it.
  function take(m) {
    switch (m.kind) {
      case "snapshot":
        if (m.to && m.to !== tab && lastSeq >= 0) return; // an answer to another tab's hello
        if (m.seq < lastSeq && m.to === tab) return; // older than what this tab already has
        lastSeq = m.seq;
        sessions = new Map(m.list.map((s) => [s.id, s]));
        onSnapshot(m.list);
        return;
      case "change":
        if (lastSeq < 0 || m.ev.seq <= lastSeq) return; // before the snapshot this tab waits for, or seen
        lastSeq = m.ev.seq;
        if (m.ev.type === "session.deleted") sessions.delete(m.ev.session.id);
        else sessions.set(m.ev.session.id, m.ev.session);
        onChange(m.ev);
        return;
      case "status":
        status = m;
        onStatus(m.status, m.problem ? new Problem(m.problem) : undefined);
        return;
      case "problem":
        onProblem(new Problem(m.problem));
        return;
      case "hello":
        // A tab joined: the reader tells it how things stand.
        if (reader && lastSeq >= 0) post({ kind: "snapshot", to: m.from, seq: lastSeq, list: [...sessions.values()] });
        if (reader && status) post(status);
    }
  }

  // post hands m to the other tabs of the group.
  const post = (m) => { if (!closed && channel) channel.postMessage(m); };

  // tell applies m here and posts it to the others.
  const tell = (m) => { take(m); post(m); };

  // lead reads the feed for the group until this tab closes; holding the
  // lock is holding this promise.
  function lead() {
    if (closed) return null;
    reader = readFeed(agent, lastSeq, {
      onSnapshot: (list, seq) => tell({ kind: "snapshot", to: null, seq, list }),
      onChange: (ev) => tell({ kind: "change", ev }),
      onStatus: (st, p) => tell({ kind: "status", status: st, problem: p ? p.body : null }),
      onProblem: (p) => tell({ kind: "problem", problem: p.body }),
    });
    return new Promise((resolve) => { stopLeading = resolve; });
  }

  async function join() {
    const name = await groupName(agent);
    if (closed) return;
    channel = new BroadcastChannel(name);
    channel.onmessage = (e) => { if (!closed) take(e.data); };
    onStatus("connecting");
    post({ kind: "hello", from: tab }); // a reader, if there is one, answers with a snapshot
    navigator.locks.request(name, { signal: waiting.signal }, lead).catch(() => {
      // aborted: this tab closed the feed before its turn came
    });
  }

  join();
  return {
    close() {
      closed = true;
      waiting.abort();
      if (reader) reader.close();
      if (stopLeading) stopLeading(); // the lock goes to another tab
      if (channel) channel.close();
    },
  };
}

// groupName names the tabs that read the same feed: one API key (kerneld
// counts unread per key, and a key sees only its tenant) and one agent
// filter. The key is hashed: lock and channel names are not secrets.
async function groupName(agent) {
  const key = apiKey();
  let tag = "open";
  if (key) {
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
    tag = Array.from(new Uint8Array(digest).slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
  }
  return `kerneld.console.feed/${tag}/${agent}`;
}
