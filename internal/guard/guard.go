// Package guard asks an operator's policy service whether an agent may do
// what it is about to do: before each tool call (allow, deny with a
// reason the model sees, ask a person, or rewrite the arguments) and,
// when the agent wants it, before each run (allow, refuse, or annotate
// the input). The request is a signed POST (Standard Webhooks headers,
// like kerneld's webhooks), bounded by a timeout; a guard that does not
// answer, or answers nonsense, gets the agent's on_failure decision:
// deny (fail closed, the default) or allow (fail open).
//
// It owns the wire format and the call; the kernel decides what a
// decision does to the run and records every decision in the run's log.
package guard

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

// DefaultTimeout bounds a guard call when the agent sets no timeout.
const DefaultTimeout = 5 * time.Second

// Guard is one agent's guard, ready to call.
type Guard struct {
	URL       string
	Key       webhook.Key // signs the requests
	Timeout   time.Duration
	FailOpen  bool // a failed call allows; otherwise it denies
	BeforeRun bool // also asked before each run
}

// Config is a guard as an agent file writes it.
type Config struct {
	URL       string
	Secret    string        // "whsec_" + base64
	Timeout   time.Duration // 0: DefaultTimeout
	OnFailure string        // "deny" (default) or "allow"
	BeforeRun bool
}

// Failure decisions, as on_failure names them.
const (
	OnFailureDeny  = "deny"
	OnFailureAllow = "allow"
)

// New checks c and returns its guard. Its URL must pass policy, as a
// webhook's must.
func New(c Config, policy webhook.Policy) (Guard, error) {
	if err := policy.CheckURL(c.URL); err != nil {
		return Guard{}, fmt.Errorf("url: %w", err)
	}
	if c.Secret == "" {
		return Guard{}, fmt.Errorf("secret: required: the guard's requests are signed")
	}
	key, err := webhook.ParseSecret(c.Secret)
	if err != nil {
		return Guard{}, fmt.Errorf("secret: %w", err)
	}
	if c.Timeout < 0 {
		return Guard{}, fmt.Errorf("timeout: must not be negative")
	}
	g := Guard{URL: c.URL, Key: key, Timeout: c.Timeout, BeforeRun: c.BeforeRun}
	if g.Timeout == 0 {
		g.Timeout = DefaultTimeout
	}
	switch c.OnFailure {
	case "", OnFailureDeny:
	case OnFailureAllow:
		g.FailOpen = true
	default:
		return Guard{}, fmt.Errorf("on_failure: must be deny or allow, not %q", c.OnFailure)
	}
	return g, nil
}

// Action is what a guard decided.
type Action string

// The actions. A tool call may be allowed, denied, asked or rewritten; a
// run allowed, denied or annotated.
const (
	Allow    Action = "allow"
	Deny     Action = "deny"
	Ask      Action = "ask"      // turn the call into an approval a person decides
	Rewrite  Action = "rewrite"  // run the call with Arguments instead
	Annotate Action = "annotate" // run, with Annotation added to what the model sees
)

// Decision is a guard's answer, or the agent's on_failure decision when
// the call failed.
type Decision struct {
	Action     Action
	Reason     string          // why; for a denial, what the model (or the client) is told
	Arguments  json.RawMessage // Rewrite: the arguments to run the call with (a JSON object)
	Annotation string          // Annotate: the note added to the run's input
	// Failed says the guard did not answer properly (Error says how) and
	// Action is the agent's on_failure decision.
	Failed   bool
	Error    string
	Duration time.Duration // the call's
}

// Session is what a guard is told of the session a call or run is in.
type Session struct {
	ID       string            `json:"id"`
	Tenant   string            `json:"tenant"`
	Agent    string            `json:"agent"`
	Name     string            `json:"name,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	ParentID string            `json:"parent_id,omitempty"`
	Depth    int               `json:"depth"`
}

// Resume tells a before_run guard that the run it is asked about already
// started and is being continued by another process (after a crash, a
// take-over or a hand-off at shutdown): it is asked again before the run
// goes on, as the run's tool calls made again are.
type Resume struct {
	Step   int    `json:"step"`   // the model calls the run had completed
	Reason string `json:"reason"` // crash, takeover, shutdown or store_outage
}

// ToolCall is a tool call a guard is asked about.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// RequiresApproval says the agent already makes this call wait for a
	// person.
	RequiresApproval bool `json:"requires_approval"`
}
