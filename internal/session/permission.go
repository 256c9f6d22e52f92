package session

import (
	"bytes"
	"encoding/json"
)

// Grant is a standing approval a person gave with the decision "always":
// calls of Tool are approved for the rest of the session without asking,
// only those with these Arguments when they are set.
type Grant struct {
	Tool string `json:"tool"`
	// Arguments is the canonical JSON of the arguments the grant is
	// limited to; empty for any.
	Arguments string `json:"arguments,omitempty"`
	// ToolCallID is the call whose decision gave the grant.
	ToolCallID string `json:"tool_call_id"`
	// Agent is the agent whose call's decision gave the grant when it is
	// not the session's own: a grant covers the calls of that agent only.
	Agent string `json:"agent,omitempty"`
}

// Covers reports whether g approves call c.
func (g Grant) Covers(c ToolCall) bool {
	return g.Tool == c.Name && (g.Arguments == "" || g.Arguments == CanonicalArguments(c.Arguments))
}

// CanonicalArguments returns a tool call's arguments in one spelling (keys
// sorted, no spaces), so that two calls with the same arguments compare
// equal however the model wrote them; text that is not JSON stays as is.
func CanonicalArguments(args string) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader([]byte(args)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return args
	}
	b, err := json.Marshal(v)
	if err != nil {
		return args
	}
	return string(b)
}

// GrantFor returns the first of grants that approves c.
func GrantFor(grants []Grant, c ToolCall) (Grant, bool) {
	for _, g := range grants {
		if g.Covers(c) {
			return g, true
		}
	}
	return Grant{}, false
}
