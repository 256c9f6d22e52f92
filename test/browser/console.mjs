// Drives the web console in Debian's Chromium for console_test.go. One run
// plays one scenario against the kerneld at BASE_URL and prints, on its
// last line, "result <JSON>" with what the page showed; the Go test judges
// it. Every wait is on a condition of the page, never on time.
//
//   node console.mjs <scenario>
//   env: BASE_URL, USER_DATA_DIR (a fresh directory), CHROMIUM (the
//   browser), SCREENSHOT (where the reload scenario writes its picture;
//   optional), API_KEY (the refused scenario's key).

import { chromium } from "playwright-core";

const scenario = process.argv[2];
const base = process.env.BASE_URL;
const timeout = 45_000; // generous: a loaded machine can make Chromium slow

// ---- helpers ----------------------------------------------------------------

// newSession starts a session with agent from the sidebar's picker and
// waits until its view follows the stream.
async function newSession(page, agent) {
  const before = await page.evaluate(() => location.hash);
  await page.selectOption("#agent-select", agent);
  await page.click("#new-session-start");
  await page.waitForFunction((before) => /^#\/s\/.+/.test(location.hash) && location.hash !== before &&
    !document.getElementById("session").hidden, before);
  await page.waitForSelector(".stream-status.status-live");
  return sessionID(page);
}

// sessionID is the id of the session the page shows.
const sessionID = (page) => page.evaluate(() => decodeURIComponent(location.hash.slice(4)));

// send types text where the focus is (a new session puts it in the
// message box) and sends it with Enter.
async function send(page, text) {
  await page.waitForFunction(() => document.activeElement === document.getElementById("input"));
  await page.keyboard.insertText(text);
  await page.keyboard.press("Enter");
}

// waitIdle waits until the session's state is `state` and nothing streams.
async function waitIdle(page, state) {
  await page.waitForFunction((want) =>
    document.getElementById("session-state").textContent === want &&
    document.getElementById("cancel-run").hidden &&
    document.querySelectorAll("#conversation .streaming").length === 0, state);
}

// waitWords waits until the last assistant message has at least n words.
function waitWords(page, n) {
  return page.waitForFunction((n) => {
    const msgs = document.querySelectorAll("#conversation .msg-assistant .text");
    const last = msgs[msgs.length - 1];
    return last && last.textContent.trim().split(/\s+/).length >= n;
  }, n);
}

// reloadPage reloads the page and waits until it follows the stream again.
async function reloadPage(page) {
  await page.reload();
  await page.waitForSelector(".stream-status.status-live");
}

// dropConnections asks the test to drop every connection to kerneld, and
// waits until the console has noticed and is live again.
async function dropConnections(page) {
  const dropped = page.waitForSelector(".stream-status.status-reconnecting");
  console.log("step drop");
  await dropped;
  await page.waitForSelector(".stream-status.status-live");
}

// openInbox opens the inbox from the top bar and waits for n pending approvals.
async function openInbox(page, n) {
  await page.click("#inbox-link");
  await page.waitForFunction((n) => document.querySelectorAll("#inbox-list .approval.pending").length === n, n);
}

// lines is n lines of text, for an answer taller than the screen.
const lines = (n) => Array.from({ length: n }, (_, i) => `line ${i + 1} of ${n}`).join("\n");

// controls says which of the session's controls can be used, and what the
// message box invites.
function controls(page) {
  return page.evaluate(() => {
    const on = (id) => !document.getElementById(id).disabled && !document.getElementById(id).hidden;
    return { input: on("input"), send: on("send"), fork: on("fork"), close: on("close-session"),
      regenerate: on("regenerate"), placeholder: document.getElementById("input").placeholder };
  });
}

// measure reports what of the page is out of reach: controls clipped by
// the viewport or by a box that hides its overflow, boxes and a page that
// scroll sideways, whether the page scrolls at all, where the sessions
// list and the message box are, and whether the conversation shows its
// end.
function measure(page) {
  return page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const vh = document.documentElement.clientHeight;
    const name = (el) => el.id ? `#${el.id}` : `${el.tagName.toLowerCase()}.${[...el.classList].join(".")}` +
      (el.textContent.trim() ? ` "${el.textContent.trim().slice(0, 20)}"` : "");
    const problems = [];
    if (document.documentElement.scrollWidth > vw) problems.push(`the page scrolls sideways (${document.documentElement.scrollWidth} > ${vw})`);
    for (const box of document.querySelectorAll("body *")) {
      const st = getComputedStyle(box);
      // A box a person can scroll sideways; text cut short with an
      // ellipsis (overflow hidden) is meant, and a <pre> may scroll.
      if ((st.overflowX === "auto" || st.overflowX === "scroll") && box.scrollWidth > box.clientWidth + 1 &&
          box.getClientRects().length && !box.closest("pre")) {
        problems.push(`${name(box)} scrolls sideways (${box.scrollWidth} > ${box.clientWidth})`);
      }
    }
    for (const el of document.querySelectorAll("button, input, select, textarea, a[href]")) {
      const r = el.getBoundingClientRect();
      if (!el.getClientRects().length || r.width < 2 || r.height < 2 || getComputedStyle(el).visibility === "hidden") continue;
      let left = 0, right = vw;
      for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        if (getComputedStyle(p).overflowX === "visible") continue;
        const pr = p.getBoundingClientRect();
        left = Math.max(left, pr.left);
        right = Math.min(right, pr.right);
      }
      if (r.left < left - 0.5 || r.right > right + 0.5) problems.push(`${name(el)} is clipped (${Math.round(r.left)}..${Math.round(r.right)} in ${Math.round(left)}..${Math.round(right)})`);
    }
    const conv = document.getElementById("conversation");
    const input = document.getElementById("input").getBoundingClientRect();
    const send = document.getElementById("send").getBoundingClientRect();
    return {
      problems,
      pageScrolls: document.documentElement.scrollHeight > vh + 1,
      sessionsTop: Math.round(document.getElementById("sessions-h").getBoundingClientRect().top),
      viewportHeight: vh,
      composerOnScreen: !document.getElementById("session").hidden && input.top >= 0 && input.bottom <= vh && send.bottom <= vh,
      conversationScrolls: conv.scrollHeight > conv.clientHeight + 1,
      atEnd: conv.scrollHeight - conv.scrollTop - conv.clientHeight < 2,
    };
  });
}

// messagesOf keeps a transcript's messages as "role: text".
const messagesOf = (items) => items.filter((it) => it.kind === "message").map((it) => `${it.role}: ${it.text}`);

// feedRequests are where each request for the session feed resumed (its
// Last-Event-ID), or "snapshot", in every tab.
const feedRequests = [];

// transcript is what the conversation shows, item by item.
function transcript(page) {
  return page.$$eval("#conversation > *", (els) => els.map((el) => {
    if (el.classList.contains("msg")) return { kind: "message", role: el.classList.contains("msg-user") ? "user" : "assistant", who: el.querySelector(".who").textContent, text: el.querySelector(".text").textContent };
    if (el.classList.contains("tool")) return { kind: "tool", name: el.querySelector(".tool-name").textContent, state: el.querySelector(".badge").textContent };
    if (el.classList.contains("approval")) return { kind: "approval", state: el.querySelector(".approval-state").textContent };
    if (el.classList.contains("reasoning")) return { kind: "reasoning", text: el.querySelector(".text").textContent, open: el.open };
    return { kind: el.className, text: el.textContent };
  }));
}

// sidebar lists the sessions the sidebar shows, each as
// "title|status|badges" (badges: every badge's text, in order: unread,
// status, waiting approvals).
function sidebar(page) {
  return page.$$eval("#sessions a", (els) => els.map((a) => [
    a.querySelector(".title").textContent,
    a.querySelector(".badge[class*='state-']").textContent,
    [...a.querySelectorAll(".badge")].map((b) => b.textContent).join(" "),
  ].join("|")));
}

// waitSidebar waits until every one of n sessions in the sidebar passes
// the check named by want: "waiting" (a generated title, waiting for two
// approvals, one answer unread) or "idle" (nothing waits, two answers
// unread).
function waitSidebar(page, n, want) {
  return page.waitForFunction(([n, want]) => {
    const rows = [...document.querySelectorAll("#sessions a")];
    return rows.length === n && rows.every((a) => {
      const status = a.querySelector(".badge[class*='state-']").textContent;
      const pending = a.querySelector(".pending-badge");
      const unread = a.querySelector(".unread-badge");
      if (want === "idle") return status === "idle" && !pending && unread && unread.textContent === "2";
      return status === "waiting_input" && pending && pending.textContent === "2 to approve" &&
        unread && unread.textContent === "1" && a.querySelector(".title").textContent !== "gated";
    });
  }, [n, want]);
}

// ---- scenarios ----------------------------------------------------------------

// shot keeps a picture of the page as SHOTS/name.png, when SHOTS is set.
async function shot(page, name) {
  if (process.env.SHOTS) await page.screenshot({ path: `${process.env.SHOTS}/${name}.png` });
}

// atWidths measures the page, and keeps its picture, at 1280 and at 390 px.
async function atWidths(page, name) {
  await shot(page, `${name}-1280`);
  const wide = await measure(page);
  await page.setViewportSize({ width: 390, height: 844 });
  const narrow = await measure(page);
  await shot(page, `${name}-390`);
  await page.setViewportSize({ width: 1280, height: 1000 });
  return { wide, narrow };
}

// problemShown waits for the problem in the element id and returns its text.
async function problemShown(page, id) {
  await page.waitForSelector(`#${id}:not([hidden])`);
  return page.textContent(`#${id}`);
}

// mcpServers lists the MCP panel's servers as "name|state".
const mcpServers = (page) => page.$$eval("#mcp-list .mcp-server", (els) => els.map((el) =>
  `${el.dataset.name}|${el.querySelector(".mcp-state").textContent}`));

// schedules lists the Schedules panel's schedules, as their text.
const schedules = (page) => page.$$eval("#schedule-list .schedule", (els) => els.map((el) => el.textContent));

const scenarios = {
  // mcp: the reference server at MCP_URL attached from the session's MCP
  // panel, used by the agent's run, refused under a bad name, detached.
  async mcp(page) {
    const id = await newSession(page, "mcp-session");
    await page.click("#mcp-toggle");
    await page.waitForSelector("#mcp-list .empty");
    await page.fill("#mcp-name", "everything");
    await page.fill("#mcp-url", process.env.MCP_URL);
    await page.fill("#mcp-headers", "X-Docs-Token: Bearer ${DOCS_TOKEN}");
    await page.click("#mcp-attach");
    await page.waitForSelector('#mcp-list .mcp-server[data-name="everything"]');
    const servers = await mcpServers(page);
    await page.fill("#mcp-name", "not a name!");
    await page.fill("#mcp-url", process.env.MCP_URL);
    await page.click("#mcp-attach");
    const refused = await problemShown(page, "mcp-problem");
    await page.fill("#mcp-name", "");
    await page.fill("#input", "Hello, MCP");
    await page.click("#send");
    await page.waitForFunction(() => [...document.querySelectorAll("#conversation .tool .result")]
      .some((el) => el.textContent.includes("Echo: Hello, MCP")));
    await waitIdle(page, "completed");
    await page.waitForFunction(() => document.querySelector("#mcp-list .mcp-state").textContent === "running");
    servers.push(...await mcpServers(page));
    const { wide, narrow } = await atWidths(page, "mcp");
    const result = { id, servers, refused, wide, narrow, transcript: await transcript(page) };
    await page.click('#mcp-list .mcp-server[data-name="everything"] .detach');
    await page.waitForSelector("#mcp-list .empty");
    result.detached = await mcpServers(page);
    return result;
  },
  // background: the dispatcher starts echo in the background; echo's
  // answer arrives later as an input of its own, answered in turn.
  async background(page) {
    const id = await newSession(page, "dispatcher");
    await send(page, "Hello, background");
    await page.waitForFunction(() => [...document.querySelectorAll("#conversation .msg-assistant .text")]
      .some((el) => el.textContent === "Echo's answer has arrived."));
    await waitIdle(page, "completed");
    await shot(page, "background-1280");
    return { id, transcript: await transcript(page) };
  },
  // schedule: a reminder for now fires into the conversation; a daily
  // schedule is listed, then cancelled; too short an interval is refused.
  async schedule(page) {
    const id = await newSession(page, "echo");
    await page.click("#schedules-toggle");
    await page.waitForSelector("#schedule-list .empty");
    await page.fill("#schedule-input", "Too often");
    await page.fill("#schedule-every", "1s");
    await page.click("#schedule-add");
    const refused = await problemShown(page, "schedules-problem");
    await page.fill("#schedule-every", "");
    await page.fill("#schedule-input", "Remind me to stretch.");
    await page.click("#schedule-now");
    await page.click("#schedule-add");
    await page.waitForFunction(() => [...document.querySelectorAll("#conversation .msg-assistant .text")]
      .some((el) => el.textContent === "Remind me to stretch."));
    await waitIdle(page, "completed");
    await page.fill("#schedule-input", "Summarise the day.");
    await page.fill("#schedule-every", "24h");
    await page.selectOption("#schedule-if-busy", "queue");
    await page.click("#schedule-add");
    // The reminder, fired once, is gone from the list; the daily one stays.
    await page.waitForFunction(() => {
      const items = [...document.querySelectorAll("#schedule-list .schedule")];
      return items.length === 1 && items[0].textContent.includes("Summarise the day.");
    });
    const listed = await schedules(page);
    const { wide, narrow } = await atWidths(page, "schedules");
    await page.click("#schedule-list .cancel-schedule");
    await page.waitForSelector("#schedule-list .empty");
    return { id, refused, schedules: listed, cancelled: await schedules(page), wide, narrow, transcript: await transcript(page) };
  },
  // handoff: a writer session hands its next input to its peer critic.
  async handoff(page) {
    const id = await newSession(page, "writer");
    await page.waitForSelector("#agent-choice:not([hidden])");
    const agents = await page.$$eval("#run-agent option", (els) => els.map((el) => el.textContent));
    await send(page, "a haiku about queues");
    await waitIdle(page, "completed");
    await page.selectOption("#run-agent", "critic");
    await page.fill("#input", "too long?");
    await page.click("#send");
    await page.waitForFunction(() => document.querySelectorAll("#conversation .msg").length === 4);
    await waitIdle(page, "completed");
    await shot(page, "handoff-1280");
    // A new tab draws the conversation from a snapshot, which names critic too.
    const other = await page.context().newPage();
    await other.goto(`${base}/#/s/${encodeURIComponent(id)}`);
    await other.waitForSelector(".stream-status.status-live");
    await other.waitForFunction(() => document.querySelectorAll("#conversation .msg").length === 4);
    return { id, agents, transcript: await transcript(page), other: await transcript(other) };
  },
  // image: an image file sent with a message shows under its text.
  async image(page) {
    const id = await newSession(page, "echo");
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    await page.setInputFiles("#attach", { name: "dot.png", mimeType: "image/png", buffer: Buffer.from(png, "base64") });
    await page.fill("#input", "what is this?");
    await page.click("#send");
    await waitIdle(page, "completed");
    await page.waitForFunction(() => {
      const img = document.querySelector("#conversation .msg-user img.image");
      return img && img.src.startsWith("data:image/png;base64,");
    });
    const image = await page.$eval("#conversation .msg-user img.image", (el) => el.src);
    return { id, image, transcript: await transcript(page) };
  },
  // chat: two turns with the echo agent, streamed to the end.
  async chat(page) {
    const agents = await page.$$eval("#agent-select option", (els) => els.map((el) => el.textContent));
    await page.selectOption("#agent-select", "offline");
    const offline = { about: await page.textContent("#agent-about"), startable: await page.isEnabled("#new-session-start") };
    await page.selectOption("#agent-select", "echo");
    agents.push(await page.textContent("#agent-about"));
    const id = await newSession(page, "echo");
    await send(page, "hello from the browser");
    await waitIdle(page, "completed");
    await send(page, "and a second line");
    await page.waitForFunction(() => document.querySelectorAll("#conversation .msg-assistant:not(.streaming)").length === 2);
    await waitIdle(page, "completed");
    // The sidebar follows the feed: the session is listed, idle, without a refresh.
    await page.waitForSelector(`#sessions a[data-id="${id}"][aria-current="page"] .state-idle`);
    // The list's filters: another agent's sessions, then this one's.
    await page.selectOption("#filter-agent", "gated");
    await page.waitForSelector("#sessions .empty");
    await page.selectOption("#filter-agent", "echo");
    await page.selectOption("#filter-state", "idle");
    await page.waitForSelector(`#sessions a[data-id="${id}"]`);
    const listed = await page.$$eval("#sessions a", (els) => els.map((el) => el.dataset.id));
    const chat = await transcript(page);
    // Regenerate the last answer (in a fork), fork that, and close the fork.
    await page.click("#regenerate");
    await page.waitForFunction((id) => !location.hash.endsWith(id), id);
    await page.waitForFunction(() => document.querySelectorAll("#conversation .msg-assistant:not(.streaming)").length === 2);
    await waitIdle(page, "completed");
    const regenerated = await transcript(page);
    const regeneratedID = await page.evaluate(() => decodeURIComponent(location.hash.slice(4)));
    await page.click("#fork");
    await page.waitForFunction((id) => !location.hash.endsWith(id), regeneratedID);
    await page.waitForFunction(() => document.querySelectorAll("#conversation .msg").length === 4);
    const forked = await transcript(page);
    page.once("dialog", (d) => d.accept());
    await page.click("#close-session");
    await page.waitForFunction(() => document.getElementById("session-state").textContent === "closed");
    const closed = await page.evaluate(() => document.getElementById("input").disabled);
    return { id, agents, offline, listed, transcript: chat, regenerated, forked, closed };
  },

  // lifecycle: what a newcomer met in a fork, after a closed session and
  // on a link to a deleted one. The test delays each run's recorded end,
  // so the header is read while kerneld still says the run is going.
  async lifecycle(page) {
    const id = await newSession(page, "echo");
    await send(page, "the first words");
    await waitIdle(page, "completed");
    await page.click("#fork");
    await page.waitForFunction((id) => !location.hash.endsWith(id), id);
    await page.waitForFunction(() => document.querySelectorAll("#conversation .msg").length === 2);
    // A fork shows Regenerate before anything is sent to it, and it works.
    await page.waitForSelector("#regenerate:not([hidden])");
    const forkID = await sessionID(page);
    await page.click("#regenerate");
    await page.waitForFunction((id) => !location.hash.endsWith(id), forkID);
    await page.waitForFunction(() => document.querySelectorAll("#conversation .msg-assistant:not(.streaming)").length === 1 &&
      document.querySelectorAll("#conversation .msg").length === 2);
    await waitIdle(page, "completed");
    const regenerated = await transcript(page);
    const regeneratedID = await sessionID(page);
    page.once("dialog", (d) => d.accept());
    await page.click("#close-session");
    await page.waitForFunction(() => document.getElementById("session-state").textContent === "closed");
    const closedView = await controls(page);
    // A session opened after a closed one takes input again.
    await newSession(page, "echo");
    const next = await controls(page);
    // A link to a deleted session leaves nothing to press but the way back.
    await page.evaluate((id) => fetch(`/sessions/${encodeURIComponent(id)}`, { method: "DELETE" }), regeneratedID);
    await page.goto(`${base}/#/s/${encodeURIComponent(regeneratedID)}`);
    await page.waitForSelector("#session-problem:not([hidden])");
    await page.waitForFunction(() => document.getElementById("send").disabled);
    return { id, regenerated, closedView, next, deleted: { ...(await controls(page)), problem: await page.textContent("#session-problem") } };
  },

  // layout: at 1280 and at 390 px, nothing is clipped and nothing makes
  // the page scroll sideways; the sessions list starts on the first
  // screen; at 390 px the conversation scrolls by itself, follows the
  // answer, and the message box stays on screen.
  async layout(page) {
    const shot = (name) => process.env.SHOTS && page.screenshot({ path: `${process.env.SHOTS}/${name}.png` });
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.waitForSelector("#agent-select option", { state: "attached" });
    await page.waitForSelector("#sessions .pending-badge"); // the test's run waits for approvals
    const wide = { home: await measure(page) };
    await newSession(page, "echo");
    await send(page, lines(40));
    await waitIdle(page, "completed");
    wide.session = await measure(page);
    await shot("console-1280");
    await page.click("#settings-toggle");
    await page.waitForSelector("#settings:not([hidden]) #permission-mode option", { state: "attached" });
    wide.settings = await measure(page);
    await shot("console-1280-settings");
    await openInbox(page, 2);
    wide.inbox = await measure(page);
    await shot("console-1280-inbox");
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${base}/`);
    await page.waitForSelector("#agent-select option", { state: "attached" });
    await page.waitForSelector("#sessions .pending-badge");
    const narrow = { home: await measure(page) };
    await shot("console-390-list");
    await openInbox(page, 2);
    narrow.inbox = await measure(page);
    await shot("console-390-inbox");
    await page.goto(`${base}/`);
    await page.waitForSelector("#agent-select option", { state: "attached" });
    await newSession(page, "paced");
    await send(page, lines(30));
    await page.click(".approval.pending button.approve");
    await waitWords(page, 25); // mid-answer, the box long past full
    narrow.streaming = await measure(page);
    await shot("console-390");
    await waitIdle(page, "completed");
    narrow.session = await measure(page);
    await page.click("#settings-toggle");
    await page.waitForSelector("#settings:not([hidden]) #permission-mode option", { state: "attached" });
    narrow.settings = await measure(page);
    await shot("console-390-settings");
    return { wide, narrow };
  },

  // child: a child session opens in its own view from its parent's; then a
  // run that fails.
  async child(page) {
    await newSession(page, "delegator");
    await send(page, "ask the child");
    await waitIdle(page, "completed");
    const parent = await transcript(page);
    await page.click(".subagent a");
    await page.waitForSelector("#session-parent a");
    await page.waitForFunction(() => document.querySelectorAll("#conversation .msg-assistant:not(.streaming)").length === 1);
    const child = await transcript(page);
    await newSession(page, "failing");
    await send(page, "try");
    await page.waitForSelector(".run-end-failed");
    await waitIdle(page, "error");
    return { transcript: parent, child, failed: await transcript(page) };
  },

  // approve: one call approved, one denied with a reason, each with its arguments shown.
  async approve(page) {
    const id = await newSession(page, "gated");
    await send(page, "remember my settings");
    await page.waitForSelector(".approval.pending >> nth=1");
    const args = await page.$$eval(".approval.pending .args", (els) => els.map((el) => el.textContent));
    await page.click(".approval.pending >> nth=0 >> button.approve");
    await page.waitForSelector(".approval:not(.pending) >> nth=0");
    await page.fill(".approval.pending .reason", "not that one");
    await page.click(".approval.pending button.deny");
    await waitIdle(page, "completed");
    return { id, args, transcript: await transcript(page) };
  },

  // cancel: input sent while busy is refused with its detail, then the run is stopped.
  async cancel(page) {
    const id = await newSession(page, "waiter");
    await send(page, "take your time");
    await page.waitForSelector('.tool:has(.tool-name:text-is("wait")) .badge-running');
    await page.selectOption("#if-busy", "reject");
    await send(page, "are you done?");
    await page.waitForSelector("#session-problem:not([hidden])");
    const busyProblem = await page.textContent("#session-problem");
    await page.click("#cancel-run");
    await page.waitForSelector(".run-end-cancelled");
    await waitIdle(page, "completed");
    const first = await transcript(page);
    // A second run, stopped from a new tab, which starts from a snapshot of
    // the first run while the second is in progress.
    await page.fill("#input", "once more");
    await page.press("#input", "Enter");
    await page.waitForSelector(".tool >> nth=1 >> .badge-running");
    const other = await page.context().newPage();
    await other.goto(page.url());
    await other.waitForSelector(".tool >> nth=1 >> .badge-running");
    await other.click("#cancel-run");
    await waitIdle(other, "completed");
    await page.waitForSelector(".run-end-cancelled >> nth=1");
    return { id, busyProblem, transcript: first, other: await transcript(other) };
  },

  // reload: the page is reloaded while the run waits for an approval, and
  // again while the answer streams; the conversation must hold every token once.
  async reload(page) {
    const id = await newSession(page, "paced");
    await send(page, "blue");
    await page.waitForSelector(".approval.pending");
    await reloadPage(page);
    const restored = await transcript(page);
    // A new tab has nothing saved: it starts from a snapshot, mid-run. It
    // opens while the run waits for the approval: opening a tab can take
    // a loaded machine longer than the answer takes to stream.
    const other = await page.context().newPage();
    await other.goto(page.url());
    await other.waitForSelector(".approval.pending");
    await page.click(".approval.pending button.approve");
    await waitWords(page, 12);
    if (process.env.SCREENSHOT) {
      await page.evaluate(() => document.activeElement && document.activeElement.blur());
      await page.screenshot({ path: process.env.SCREENSHOT, animations: "disabled" });
    }
    await reloadPage(page);
    await waitIdle(page, "completed");
    await waitIdle(other, "completed");
    return { id, restored, transcript: await transcript(page), other: await transcript(other) };
  },

  // drop: the test drops every connection while the run waits for an
  // approval, and again mid-answer; the console reconnects by itself.
  async drop(page) {
    const id = await newSession(page, "paced");
    await send(page, "green");
    await page.waitForSelector(".approval.pending");
    await dropConnections(page);
    await page.click(".approval.pending button.approve");
    await waitWords(page, 8);
    await dropConnections(page);
    await waitIdle(page, "completed");
    return { id, transcript: await transcript(page) };
  },

  // resume: kerneld is killed mid-answer and started again; the console
  // follows the run to its end and shows it as one answer, with a note.
  async resume(page) {
    const id = await newSession(page, "talking");
    await send(page, "count");
    await waitWords(page, 5);
    const reconnecting = page.waitForSelector(".stream-status.status-reconnecting");
    console.log("step kill");
    await reconnecting;
    await page.waitForSelector(".stream-status.status-live");
    await waitIdle(page, "completed");
    if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT });
    return { id, transcript: await transcript(page) };
  },

  // feed: two tabs follow the session feed; the test starts two runs
  // through the API that each wait for two approvals, then drops every
  // connection; one tab decides them all from the inbox.
  async feed(page) {
    const other = await page.context().newPage();
    await other.goto(`${base}/`);
    for (const p of [page, other]) await p.waitForSelector("#feed-status.status-live");
    console.log("step runs");
    await waitSidebar(page, 2, "waiting");
    await waitSidebar(other, 2, "waiting");
    await other.waitForFunction(() => document.getElementById("inbox-count").textContent === "4");
    const waiting = await sidebar(page);
    const otherWaiting = await sidebar(other);
    const inboxCount = await other.textContent("#inbox-count");
    // Every connection dropped: both feeds resume where they were.
    const dropped = Promise.all([page, other].map((p) => p.waitForSelector("#feed-status.status-reconnecting")));
    console.log("step drop");
    await dropped;
    for (const p of [page, other]) await p.waitForSelector("#feed-status.status-live");
    await page.click("#inbox-link");
    await page.waitForFunction(() => document.querySelectorAll("#inbox-list .approval.pending").length === 4);
    const inbox = await page.$$eval("#inbox-list .approval", (els) => els.map((el) =>
      `${el.querySelector(".inbox-session a").textContent}|${el.querySelector("h3 code").textContent}`));
    const pending = (text) => page.locator("#inbox-list .approval.pending", { hasText: text });
    await pending("Lisbon").first().locator("button.approve").click();
    await page.waitForFunction(() => [...document.querySelectorAll("#inbox-list .approval.pending")]
      .filter((el) => el.textContent.includes("Lisbon")).length === 1);
    await pending("Lisbon").locator(".reason").fill("not now");
    await pending("Lisbon").locator("button.deny").click();
    await pending("release notes").first().locator("button.always").click();
    // Always approved the other call of that run too: the inbox empties.
    await page.waitForSelector("#inbox-list .empty");
    await other.waitForFunction(() => document.getElementById("inbox-count").textContent === "");
    await waitSidebar(page, 2, "idle");
    await waitSidebar(other, 2, "idle");
    const idle = await sidebar(page);
    const otherIdle = await sidebar(other);
    // Opening a session reads it: its unread badge goes, in both tabs.
    await page.locator("#sessions a", { hasText: "Lisbon" }).click();
    await page.waitForSelector(".stream-status.status-live");
    const lisbonRead = () => {
      const a = [...document.querySelectorAll("#sessions a")].find((el) => el.textContent.includes("Lisbon"));
      return a && !a.querySelector(".unread-badge");
    };
    await other.waitForFunction(lisbonRead);
    await page.evaluate(() => { location.hash = "#/"; });
    await page.waitForFunction(lisbonRead);
    return { waiting, otherWaiting, inboxCount, inbox, idle, otherIdle, read: await sidebar(page), otherRead: await sidebar(other) };
  },

  // tabs: five tabs at the console, each with a session of its own open,
  // which over HTTP/1.1 (six connections to an origin) starves a console
  // that holds a feed and a stream per tab. Runs started through the API
  // show in every sidebar and inbox count; a run started through the API
  // in a session a tab shows streams into it; Send works in every tab at
  // once; the tab reading the feed for the others closes, another takes
  // over, and a run started after that still reaches every tab.
  async tabs(page) {
    const tabs = [page];
    const errors = [];
    for (let i = 1; i < 5; i++) {
      const tab = await page.context().newPage();
      tab.on("pageerror", (err) => errors.push(`tab ${i}: ${err}`));
      await tab.goto(`${base}/`);
      tabs.push(tab);
    }
    for (const tab of tabs) await tab.waitForSelector("#feed-status.status-live");
    const ids = [];
    for (const tab of tabs) ids.push(await newSession(tab, "echo"));
    console.log(`step runs ${ids[2]}`);
    const everyTab = (fn, arg) => Promise.all(tabs.map((tab) => tab.waitForFunction(fn, arg)));
    const waitingRows = (n) => {
      const rows = [...document.querySelectorAll("#sessions a")];
      const gated = rows.filter((a) => a.querySelector(".pending-badge"));
      return rows.length === n && gated.length === 2 && gated.every((a) =>
        a.querySelector(".badge[class*='state-']").textContent === "waiting_input" &&
        a.querySelector(".pending-badge").textContent === "2 to approve" &&
        a.querySelector(".unread-badge") && a.querySelector(".title").textContent !== "gated") &&
        document.getElementById("inbox-count").textContent === "4";
    };
    await everyTab(waitingRows, 7);
    // The run started through the API in the session tab 2 shows.
    await tabs[2].waitForFunction(() => [...document.querySelectorAll("#conversation .msg-assistant .text")]
      .some((el) => el.textContent === "from curl"));
    await waitIdle(tabs[2], "completed");
    const sidebars = await Promise.all(tabs.map(sidebar));
    if (process.env.SHOTS) {
      for (const i of [0, 3]) await tabs[i].screenshot({ path: `${process.env.SHOTS}/tab${i}.png` });
    }
    // Send in every tab at once.
    await Promise.all(tabs.map(async (tab, i) => {
      await tab.focus("#input");
      await send(tab, `hello from tab ${i}`);
      await tab.waitForFunction((want) => [...document.querySelectorAll("#conversation .msg-assistant .text")]
        .some((el) => el.textContent === want), `hello from tab ${i}`);
      await waitIdle(tab, "completed");
    }));
    const answers = await Promise.all(tabs.map(async (tab) => messagesOf(await transcript(tab))));
    // The tab that reads the feed for the others goes; another takes over.
    const feedsBefore = feedRequests.length;
    await page.goto("about:blank");
    const rest = tabs.slice(1);
    console.log("step more");
    await Promise.all(rest.map((tab) => tab.waitForFunction(() => document.querySelectorAll("#sessions a").length === 8 &&
      document.getElementById("inbox-count").textContent === "6")));
    const after = await Promise.all(rest.map(sidebar));
    if (process.env.SHOTS) await rest[0].screenshot({ path: `${process.env.SHOTS}/takeover.png` });
    return { ids, sidebars, answers, after, errors, takeover: feedRequests.slice(feedsBefore) };
  },

  // settings: a session retitled and set to run read-only tools without
  // asking from its settings; then Always on one call approves its
  // sibling and the next run's calls, which say why they ran unasked.
  async settings(page) {
    const id = await newSession(page, "gated");
    await page.click("#settings-toggle");
    await page.waitForSelector("#settings:not([hidden]) #permission-mode option", { state: "attached" });
    const modes = await page.$$eval("#permission-mode option", (els) => els.map((el) => el.value));
    await page.fill("#title-input", "My saved settings");
    await page.selectOption("#permission-mode", "read_only_auto");
    await page.click("#settings-save");
    await page.waitForFunction(() => document.getElementById("settings-status").textContent === "Saved." &&
      document.getElementById("session-title").textContent === "My saved settings");
    await page.waitForFunction((id) => {
      const a = document.querySelector(`#sessions a[data-id="${id}"] .title`);
      return a && a.textContent === "My saved settings";
    }, id);
    await page.click("#settings-toggle"); // closes it
    await page.focus("#input");
    await send(page, "remember my settings");
    await page.waitForSelector(".approval.pending >> nth=1");
    await page.click(".approval.pending >> nth=0 >> button.always");
    await waitIdle(page, "completed");
    await page.focus("#input");
    await send(page, "and again");
    await page.waitForFunction(() => document.querySelectorAll("#conversation .note").length === 2);
    await waitIdle(page, "completed");
    const notes = await page.$$eval("#conversation .note", (els) => els.map((el) => el.textContent));
    return { id, modes, notes, transcript: await transcript(page) };
  },

  // instructions: a session's instructions set from its settings.
  async instructions(page) {
    const id = await newSession(page, "echo");
    await page.click("#settings-toggle");
    await page.waitForSelector("#settings:not([hidden]) #instructions-field:not([hidden])");
    await page.fill("#instructions-input", "Answer in French.");
    await page.click("#settings-save");
    await page.waitForFunction(() => document.getElementById("settings-status").textContent === "Saved.");
    return { id };
  },

  // clear: a conversation cleared from its settings; this tab and another
  // showing the session reset their view, then go on from the clear.
  async clear(page) {
    const id = await newSession(page, "echo");
    await send(page, "before the clear");
    await waitIdle(page, "completed");
    const other = await page.context().newPage();
    await other.goto(page.url());
    await other.waitForSelector("#conversation .msg-assistant");
    await waitIdle(other, "completed");
    await page.click("#settings-toggle");
    page.once("dialog", (d) => d.accept());
    await page.click("#clear-session:not([hidden])");
    const reset = (tab) => tab.waitForFunction(() =>
      document.querySelectorAll("#conversation .msg").length === 0 &&
      document.querySelector("#conversation .note") !== null);
    await reset(page);
    await reset(other);
    const cleared = await transcript(page);
    const otherCleared = await transcript(other);
    await page.fill("#input", "after the clear");
    await page.press("#input", "Enter");
    const answered = (tab) => tab.waitForFunction(() => document.querySelectorAll("#conversation .msg").length === 2);
    await answered(page);
    await answered(other);
    await waitIdle(page, "completed");
    await waitIdle(other, "completed");
    return { id, cleared, otherCleared, transcript: await transcript(page), other: await transcript(other) };
  },

  // refused: without a key the console shows the 401's detail; with one it works.
  async refused(page) {
    await page.waitForSelector("#global-problem:not([hidden])");
    const problem = await page.textContent("#global-problem");
    await page.fill("#key-input", process.env.API_KEY);
    await page.press("#key-input", "Enter");
    await page.waitForSelector('#agent-select option[value="echo"]', { state: "attached" });
    const id = await newSession(page, "echo");
    await send(page, "with a key");
    await waitIdle(page, "completed");
    return { id, problem, transcript: await transcript(page) };
  },
};

async function main() {
  const context = await chromium.launchPersistentContext(process.env.USER_DATA_DIR, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 1000 },
    colorScheme: "light",
  });
  context.setDefaultTimeout(timeout);

  // Any request to another origin fails the run: the console must work offline.
  const foreign = [];
  context.on("request", (req) => {
    if (!req.url().startsWith(base) && !req.url().startsWith("data:")) foreign.push(req.url());
  });
  const pageErrors = [];
  // Where each request for the event stream started reading.
  const streams = [];
  const feeds = feedRequests;
  context.on("request", (req) => {
    const url = new URL(req.url());
    if (url.pathname === "/sessions/events") feeds.push(req.headers()["last-event-id"] || (url.searchParams.get("snapshot") ? "snapshot" : ""));
    else if (url.pathname.endsWith("/events")) streams.push(url.search);
  });

  try {
    const page = context.pages()[0] || await context.newPage();
    page.on("pageerror", (err) => pageErrors.push(String(err)));
    await page.goto(base + "/");
    let result;
    try {
      result = await scenarios[scenario](page);
    } catch (err) {
      // Say what the page showed when the scenario gave up waiting.
      const shown = await page.evaluate(() => ({
        hash: location.hash,
        state: document.getElementById("session-state").textContent,
        stream: document.getElementById("stream-status").textContent,
        stopRun: !document.getElementById("cancel-run").hidden,
        problems: [...document.querySelectorAll(".problem:not([hidden])")].map((el) => el.textContent),
      })).catch(() => ({}));
      console.error("page:", JSON.stringify(shown), "\ntranscript:", JSON.stringify(await transcript(page).catch(() => [])), "\nstreams:", streams);
      throw err;
    }
    result.foreignRequests = foreign;
    result.pageErrors = pageErrors;
    result.streams = streams;
    result.feeds = feeds;
    console.log("result " + JSON.stringify(result));
  } finally {
    await context.close();
  }
}

await main();
