// A chat with a kerneld agent through the Vercel AI SDK's useChat. The
// chat id lives in the URL (?chat=…&agent=…), so a reload finds the chat:
// its history comes from GET /sessions/{id}/transcript, and an answer
// still streaming is picked up where it is (resume: true).
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from "ai";
import { useEffect, useState } from "react";

const params = new URLSearchParams(location.search);
const agent = params.get("agent") ?? "echo";
if (!params.has("chat")) {
  params.set("chat", crypto.randomUUID());
  history.replaceState(null, "", `?${params}`);
}
const chatId = params.get("chat")!;

// loadChat returns the chat's history, [] for a new chat. After a
// regenerate the chat goes on in a fork, which the chat's session names.
async function loadChat(): Promise<UIMessage[]> {
  const res = await fetch(`/sessions/${chatId}`);
  if (!res.ok) return [];
  const session = await res.json();
  const transcript = await fetch(`/sessions/${session.metadata?.ai_sdk_session ?? chatId}/transcript`);
  return transcript.ok ? transcript.json() : [];
}

export function App() {
  const [initial, setInitial] = useState<UIMessage[] | null>(null);
  useEffect(() => {
    loadChat().then(setInitial, () => setInitial([]));
  }, []);
  return initial === null ? <p>Loading…</p> : <Chat initial={initial} />;
}

function Chat({ initial }: { initial: UIMessage[] }) {
  const { messages, sendMessage, addToolApprovalResponse, status, error } = useChat({
    id: chatId,
    messages: initial,
    resume: true,
    transport: new DefaultChatTransport({ api: `/agents/${agent}/ai-sdk` }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  return (
    <main style={{ fontFamily: "system-ui", maxWidth: 640, margin: "2rem auto" }}>
      <h1>
        {agent} <small id="status">{status}</small>
      </h1>
      {messages.map((m) => (
        <div key={m.id} className={`msg msg-${m.role}`} data-id={m.id}>
          <b>{m.role}</b>
          {m.parts.map((part, i) => {
            if (part.type === "text") return <p key={i} className="text">{part.text}</p>;
            if (!part.type.startsWith("tool-") || !("toolCallId" in part)) return null;
            return (
              <div key={i} className="tool" data-state={part.state}>
                <code>
                  {part.type.slice(5)}({JSON.stringify(part.input)}) → {part.state}
                </code>
                {part.state === "approval-requested" && (
                  <>
                    <button onClick={() => addToolApprovalResponse({ id: part.approval.id, approved: true })}>Approve</button>
                    <button onClick={() => addToolApprovalResponse({ id: part.approval.id, approved: false })}>Deny</button>
                  </>
                )}
              </div>
            );
          })}
        </div>
      ))}
      {error && <p id="error">{error.message}</p>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (input.trim() === "") return;
          sendMessage({ text: input });
          setInput("");
        }}
      >
        <input id="input" value={input} onChange={(e) => setInput(e.target.value)} placeholder="Say something" />
        <button type="submit" disabled={status !== "ready"}>
          Send
        </button>
      </form>
    </main>
  );
}
