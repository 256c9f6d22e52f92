// Drives the CopilotKit page in Debian's Chromium for copilotkit_test.go.
// It plays every scenario against two runtimes that share one kerneld,
// and prints, on its last line, "result <JSON>" with what the pages
// showed; the Go test judges it. Every wait is on a condition of the
// page, never on time.
//
//   node browser.mjs
//   env: RUNTIME_A, RUNTIME_B (the two runtimes' URLs), CHROMIUM (the
//   browser), USER_DATA_DIR (a fresh directory), SHOTS (where to write
//   screenshots; optional)
import { chromium } from "playwright-core";

const [runtimeA, runtimeB] = [process.env.RUNTIME_A, process.env.RUNTIME_B];
const timeout = 45_000; // generous: a loaded machine can make Chromium slow
const result = { foreignRequests: [], pageErrors: [] };

const chat = '[data-testid="copilot-chat"]';
const input = '[data-testid="copilot-chat-input"] textarea';

// open loads the page for agent on thread, through runtime base, and
// waits until its chat takes input.
async function open(page, base, agent, thread) {
  await page.goto(`${base}/?agent=${agent}&thread=${thread}`);
  await page.waitForSelector(input);
}

// send types text into the chat and sends it.
async function send(page, text) {
  await page.fill(input, text);
  await page.keyboard.press("Enter");
}

// waitAnswer waits until the chat is idle and its last message is an
// assistant message reading text.
function waitAnswer(page, text) {
  return page.waitForFunction(([chat, text]) => {
    const root = document.querySelector(chat);
    const msgs = root?.querySelectorAll('[data-testid="copilot-user-message"], [data-testid="copilot-assistant-message"]');
    const last = msgs?.[msgs.length - 1];
    return root.dataset.copilotRunning === "false" && last?.dataset.testid === "copilot-assistant-message" &&
      last.textContent.trim() === text;
  }, [chat, text]);
}

// transcript is the conversation as the page shows it: "role: text".
function transcript(page) {
  return page.$$eval('[data-testid="copilot-user-message"], [data-testid="copilot-assistant-message"]', (els) =>
    els.map((el) => `${el.dataset.testid === "copilot-user-message" ? "user" : "assistant"}: ${el.textContent.trim()}`));
}

async function shot(page, name) {
  if (process.env.SHOTS) await page.screenshot({ path: `${process.env.SHOTS}/${name}.png` });
}

// approval sends text to the gated agent, answers the interrupt with
// the button named button, and returns the transcript once the agent
// has said closing.
async function approval(page, thread, text, button, closing) {
  await open(page, runtimeA, "gated", thread);
  await send(page, text);
  await page.waitForSelector(".approval");
  const asked = await page.textContent(".approval p");
  await shot(page, `approval-${button.toLowerCase()}`);
  await page.click(`.approval button:text-is("${button}")`);
  await waitAnswer(page, closing);
  await page.waitForSelector(".approval", { state: "detached" });
  return { asked, transcript: await transcript(page) };
}

const scenarios = {
  // chat: two turns on one thread with the echo agent.
  async chat(page) {
    await open(page, runtimeA, "echo", "ck-chat");
    await send(page, "hello from CopilotKit");
    await waitAnswer(page, "hello from CopilotKit");
    await send(page, "and a second turn");
    await waitAnswer(page, "and a second turn");
    result.chat = await transcript(page);
  },
  async approve(page) {
    result.approve = await approval(page, "ck-approve", "buy milk", "Approve", "Saved your note.");
  },
  async deny(page) {
    result.deny = await approval(page, "ck-deny", "buy eggs", "Deny", "Not saved: you denied it.");
  },
  // frontendTool: the painter agent calls set_background, which the page
  // offers and runs; the agent answers after the result.
  async frontendTool(page) {
    await open(page, runtimeA, "painter", "ck-paint");
    await send(page, "rebeccapurple");
    await waitAnswer(page, "The page is painted.");
    result.background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    result.paint = await transcript(page);
    await shot(page, "frontend-tool");
  },
  // state: the page sets the agent's state, a run carries it to kerneld,
  // and a reload gets it back from kerneld with the conversation.
  async state(page) {
    await open(page, runtimeA, "echo", "ck-state");
    await page.fill('input[aria-label="mood"]', "calm");
    await page.click('button:text-is("Set state")');
    await send(page, "remember my mood");
    await waitAnswer(page, "remember my mood");
    result.stateBefore = await page.textContent('[data-testid="state"]');
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="copilot-assistant-message"]').length === 1);
    await page.waitForFunction(() => document.querySelector('[data-testid="state"]').textContent.includes("calm"));
    result.stateAfterReload = await page.textContent('[data-testid="state"]');
    result.stateTranscriptAfterReload = await transcript(page);
  },
};

// restore opens the chat thread in a new browser profile through the
// other runtime, which never ran it: its history can only come from
// kerneld.
async function restore() {
  const context = await launch("restore");
  try {
    const page = await watched(context);
    await open(page, runtimeB, "echo", "ck-chat");
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="copilot-assistant-message"]').length === 2);
    result.restored = await transcript(page);
    await send(page, "a third turn after the reload");
    await waitAnswer(page, "a third turn after the reload");
    result.continued = await transcript(page);
    await shot(page, "restored");
  } finally {
    await context.close();
  }
}

// launch starts Chromium with a fresh profile, named in USER_DATA_DIR.
function launch(profile) {
  return chromium.launchPersistentContext(`${process.env.USER_DATA_DIR}/${profile}`, {
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

// watched returns a new page of context whose errors and requests to
// other origins are recorded.
async function watched(context) {
  const page = await context.newPage();
  page.setDefaultTimeout(timeout);
  page.on("pageerror", (err) => result.pageErrors.push(err.message));
  page.on("request", (req) => {
    const url = new URL(req.url());
    if (url.hostname !== "127.0.0.1" && url.protocol !== "data:" && url.protocol !== "blob:") result.foreignRequests.push(req.url());
  });
  return page;
}

const context = await launch("main");
try {
  for (const [name, play] of Object.entries(scenarios)) {
    const page = await watched(context);
    try {
      await play(page);
    } catch (err) {
      await shot(page, `failed-${name}`);
      throw new Error(`${name}: ${err.message}`);
    }
    await page.close();
  }
  await restore();
} finally {
  console.log(`result ${JSON.stringify(result)}`);
  await context.close();
}
