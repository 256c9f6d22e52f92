// The page: CopilotKit's chat with one of kerneld's agents, on a thread
// named in the URL (?agent=gated&thread=…), so a reload continues it.
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import { CopilotChat, CopilotKit, useAgent, useFrontendTool, useInterrupt } from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import { z } from "zod";
import "./page.css";

// The thread and agent are the URL's; a page without a thread starts one.
const params = new URLSearchParams(location.search);
const agentId = params.get("agent") ?? "echo";
if (!params.get("thread")) {
  params.set("thread", crypto.randomUUID());
  history.replaceState(null, "", `?${params}`);
}
const threadId = params.get("thread");

// Approval asks the person about a kerneld approval, which reaches the
// page as an AG-UI interrupt; the answer resumes the run.
function Approval() {
  return useInterrupt({
    agentId,
    renderInChat: false,
    render: ({ interrupt, resolve, cancel }) => (
      <section className="approval" aria-label="approval">
        <p>{interrupt?.message}</p>
        <button onClick={() => resolve({ decision: "approve" })}>Approve</button>
        <button onClick={() => cancel()}>Deny</button>
      </section>
    ),
  });
}

// Background is a frontend tool: kerneld's agent calls it, the page runs it.
function Background() {
  useFrontendTool({
    name: "set_background",
    description: "Sets the page's background colour.",
    parameters: z.object({ color: z.string().describe("a CSS colour") }),
    handler: async ({ color }) => {
      document.body.style.background = color;
      return `the background is ${color} now`;
    },
  });
  return null;
}

// SharedState shows the agent's state, which kerneld stores with the
// thread, and changes it: the next run sends it to kerneld.
function SharedState() {
  const { agent } = useAgent({ agentId });
  const [mood, setMood] = useState("");
  return (
    <section className="state" aria-label="shared state">
      <code data-testid="state">{JSON.stringify(agent.state ?? {})}</code>
      <input value={mood} onChange={(e) => setMood(e.target.value)} placeholder="mood" aria-label="mood" />
      <button onClick={() => agent.setState({ ...agent.state, mood })}>Set state</button>
    </section>
  );
}

function Page() {
  return (
    <CopilotKit runtimeUrl="/api/copilotkit" enableInspector={false} showDevConsole={false}>
      <header>
        kerneld agent <b>{agentId}</b>, thread <code data-testid="thread">{threadId}</code>
      </header>
      <Background />
      <SharedState />
      <Approval />
      <main>
        <CopilotChat agentId={agentId} threadId={threadId} />
      </main>
    </CopilotKit>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <Page />
  </StrictMode>,
);
