// clients.mjs loads one generation of the official AG-UI client: 1.0.0,
// and 0.0.59, the version CopilotKit pins (react-core and react-ui 1.74,
// runtime 1.75). Both are installed side by side, 0.0.59 under the npm
// alias @ag-ui/client-0.0.59 (see package.json).
//
// The generations differ where kerneld must care: 0.0.59's HttpAgent
// validates every event with its EventSchemas before applying it, and its
// RUN_FINISHED outcomes are {type: "success"} (nothing more) and
// {type: "interrupt", ...}; 1.0.0 adds pendingToolCallIds and the
// cancelled outcome, and declares itself with RunAgentInput's
// protocolVersion, which 0.0.59 does not send.

export const versions = ["1.0.0", "0.0.59"];

// loadClient returns {version, HttpAgent, verifyEvents, EventSchema} of
// the given generation.
export async function loadClient(version = "1.0.0") {
  switch (version) {
    case "1.0.0": {
      const { HttpAgent, verifyEvents } = await import("@ag-ui/client");
      const { EventSchema } = await import("@ag-ui/core/schemas");
      return { version, HttpAgent, verifyEvents, EventSchema };
    }
    case "0.0.59": {
      // The client re-exports its own @ag-ui/core 0.0.59.
      const { HttpAgent, verifyEvents, EventSchemas } = await import("@ag-ui/client-0.0.59");
      return { version, HttpAgent, verifyEvents, EventSchema: EventSchemas };
    }
  }
  throw new Error(`unknown @ag-ui/client version ${version}; known: ${versions.join(", ")}`);
}
