// Drives the example page in Debian's Chromium for example_test.go: send
// and stream (echo), approve a tool call (gated), reload mid-answer
// (slow). Prints "result <JSON>" with what the page showed; the Go test
// judges it. Every wait is on a condition of the page, never on time.
//
//   env: BASE_URL, CHROMIUM, USER_DATA_DIR (a fresh directory), SCREENSHOT
import { chromium } from "playwright-core";

const base = process.env.BASE_URL;
const context = await chromium.launchPersistentContext(process.env.USER_DATA_DIR, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 900, height: 700 },
});
context.setDefaultTimeout(45_000); // generous: a loaded machine makes Chromium slow
const pageErrors = [];
const page = await context.newPage();
page.on("pageerror", (e) => pageErrors.push(String(e)));

// open loads the page for a new chat with agent and waits until it is ready.
async function open(agent, chat) {
  await page.goto(`${base}/?agent=${agent}&chat=${chat}`);
  await page.waitForSelector("#status:text('ready')");
}

async function send(text) {
  await page.fill("#input", text);
  await page.press("#input", "Enter");
}

// answer returns the text of the last assistant message.
const answer = () =>
  page.evaluate(() => {
    const msgs = document.querySelectorAll(".msg-assistant");
    const last = msgs[msgs.length - 1];
    return last ? [...last.querySelectorAll(".text")].map((p) => p.textContent).join(" ") : "";
  });

const waitReady = () => page.waitForFunction(() => document.getElementById("status").textContent === "ready" && document.querySelector(".msg-assistant"));

const result = { pageErrors };
try {
  await open("echo", `echo-${Date.now()}`);
  // The status may pass through "streaming" between two polls of a busy
  // machine: an observer set before the send records every state it takes.
  await page.evaluate(() => {
    window.statuses = [];
    const el = document.getElementById("status");
    new MutationObserver(() => window.statuses.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
  });
  await send("hello kerneld");
  await page.waitForFunction(() => window.statuses.includes("streaming"));
  await waitReady();
  result.echo = await answer();

  await open("gated", `gated-${Date.now()}`);
  await send("buy milk");
  await page.click("button:text('Approve')");
  await page.waitForFunction(() => document.querySelector(".tool")?.dataset.state === "output-available" &&
    document.getElementById("status").textContent === "ready");
  result.toolState = await page.evaluate(() => document.querySelector(".tool").dataset.state);
  result.approved = await answer();

  await open("slow", `slow-${Date.now()}`);
  await send("go");
  await page.waitForFunction(() => {
    const t = document.querySelector(".msg-assistant .text");
    return t && t.textContent.trim().split(/\s+/).length >= 3;
  });
  result.beforeReload = (await answer()).trim().split(/\s+/).length;
  await page.reload();
  await page.waitForFunction(() => document.querySelector(".msg-assistant .text")?.textContent.endsWith("z") &&
    document.getElementById("status").textContent === "ready");
  result.reloaded = await answer();
  if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT });
} finally {
  console.log(`result ${JSON.stringify(result)}`);
  await context.close();
}
