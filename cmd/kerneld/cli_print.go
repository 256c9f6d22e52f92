package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/kerneld/kerneld/client"
)

// printer writes a stream's events for a person: the assistant's text as
// it streams, and tool calls, results, approvals and child sessions each
// on their own line. With --json it writes each event's JSON on a line.
type printer struct {
	w, errw  io.Writer
	json     bool
	showUser bool // print the user's input too (watch)
	// askInPlace leaves out how to approve from elsewhere: the chat asks.
	askInPlace bool

	sessionID string
	roles     map[string]string           // messageId → role
	calls     map[string]*strings.Builder // toolCallId → arguments so far
	names     map[string]string           // toolCallId → tool name
	midLine   bool                        // the last text did not end its line
}

func (c *cli) printer(showUser bool) *printer {
	return &printer{w: c.stdout, errw: c.stderr, json: c.json, showUser: showUser,
		roles: map[string]string{}, calls: map[string]*strings.Builder{}, names: map[string]string{}}
}

// print writes one event.
func (p *printer) print(ev client.Event) error {
	if p.json {
		_, err := fmt.Fprintf(p.w, "%s\n", ev.Raw)
		return err
	}
	if ev.SessionID != "" {
		p.sessionID = ev.SessionID
	}
	switch ev.Type {
	case client.TextMessageStart:
		p.roles[ev.MessageID] = ev.Role
		if ev.Role == "user" && p.showUser {
			return p.text("> ")
		}
	case client.TextMessageContent:
		if p.roles[ev.MessageID] == "assistant" || p.showUser {
			return p.text(ev.Delta)
		}
	case client.TextMessageEnd:
		if p.roles[ev.MessageID] == "assistant" || p.showUser {
			return p.endLine()
		}
	case client.ToolCallStart:
		p.names[ev.ToolCallID] = ev.ToolCallName
		p.calls[ev.ToolCallID] = &strings.Builder{}
	case client.ToolCallArgs:
		if b := p.calls[ev.ToolCallID]; b != nil {
			b.WriteString(ev.Delta)
		}
	case client.ToolCallEnd:
		return p.line("→ %s(%s)", p.names[ev.ToolCallID], p.args(ev.ToolCallID))
	case client.ToolCallResult:
		return p.result(ev.ToolCallID, ev.Content, ev.IsError)
	case client.SubagentStarted:
		return p.line("→ subagent %s (session %s)", ev.Name, ev.ChildSessionID)
	case client.SubagentFinished, client.SubagentError:
		return p.line("← subagent %s", strings.ToLower(strings.TrimPrefix(ev.Type, "SUBAGENT_")))
	case client.Custom:
		return p.custom(ev)
	case client.MessagesSnapshot:
		return p.snapshot(ev)
	case client.RunFinished:
		if ev.Outcome == "cancelled" {
			return p.line("(%s)", ev.Reason)
		}
	}
	return nil
}

// snapshot writes the history a MESSAGES_SNAPSHOT holds as the events
// of its runs would have been written: the inputs (when the user's input
// is shown), the answers, each tool call and its result.
func (p *printer) snapshot(ev client.Event) error {
	msgs, _ := ev.Messages()
	for _, m := range msgs {
		if err := p.message(m); err != nil {
			return err
		}
	}
	return nil
}

// message writes one message of a snapshot.
func (p *printer) message(m client.Message) error {
	switch m.Role {
	case "user":
		if p.showUser {
			return p.line("> %s", m.Content)
		}
	case "assistant":
		if m.Content != "" {
			if err := p.line("%s", m.Content); err != nil {
				return err
			}
		}
		for _, c := range m.ToolCalls {
			p.names[c.ID] = c.Name
			if err := p.line("→ %s(%s)", c.Name, oneLine(c.Arguments)); err != nil {
				return err
			}
		}
	case "tool":
		return p.result(m.ToolCallID, m.Content, m.IsError)
	}
	return nil
}

// result writes a tool call's result.
func (p *printer) result(callID, content string, failed bool) error {
	if failed {
		return p.line("← %s failed: %s", p.names[callID], oneLine(content))
	}
	return p.line("← %s: %s", p.names[callID], oneLine(content))
}

// custom writes the kerneld.* events a person acts on.
func (p *printer) custom(ev client.Event) error {
	if req, ok := ev.ApprovalRequest(); ok {
		if p.askInPlace {
			return p.line("? %s(%s) needs approval", req.ToolName, oneLine(string(req.Arguments)))
		}
		return p.line("? %s(%s) needs approval: kerneld approve %s %s %s [--deny REASON]",
			req.ToolName, oneLine(string(req.Arguments)), p.sessionID, ev.RunID, req.ToolCallID)
	}
	if ev.Name == client.CustomApprovalResolved {
		var v struct{ Decision, Reason string }
		if err := json.Unmarshal(ev.Value, &v); err == nil {
			return p.line("  %s", decided(v.Decision, v.Reason))
		}
	}
	if ev.Name == client.CustomRunResumed {
		return p.resumed(ev)
	}
	return nil
}

// resumed notes that the run goes on after its process stopped: what was
// printed of the cut model call is said again after the note.
func (p *printer) resumed(ev client.Event) error {
	var v struct {
		Reason string   `json:"reason"`
		Cut    []string `json:"cutMessageIds"`
	}
	if err := json.Unmarshal(ev.Value, &v); err != nil {
		return nil
	}
	if len(v.Cut) > 0 {
		return p.line("↻ the run goes on after kerneld stopped (%s); the answer cut short above is given again", v.Reason)
	}
	return p.line("↻ the run goes on after kerneld stopped (%s)", v.Reason)
}

// decided says how an approval was resolved.
func decided(decision, reason string) string {
	past := map[string]string{"approve": "approved", "deny": "denied", "cancel": "cancelled"}[decision]
	if past == "" {
		past = decision
	}
	if reason != "" {
		past += ": " + reason
	}
	return past
}

// args returns a finished tool call's arguments.
func (p *printer) args(id string) string {
	if b := p.calls[id]; b != nil {
		delete(p.calls, id)
		return oneLine(b.String())
	}
	return ""
}

// text writes streamed text.
func (p *printer) text(s string) error {
	_, err := io.WriteString(p.w, s)
	p.midLine = !strings.HasSuffix(s, "\n")
	return err
}

// endLine ends the current line of text, if any.
func (p *printer) endLine() error {
	if !p.midLine {
		return nil
	}
	p.midLine = false
	_, err := io.WriteString(p.w, "\n")
	return err
}

// line writes a line of its own.
func (p *printer) line(format string, args ...any) error {
	if err := p.endLine(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(p.w, format+"\n", args...)
	return err
}

// oneLine shortens s to one line of at most 200 characters.
func oneLine(s string) string { return shorten(s, 200) }
