package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kerneld/kerneld/client"
)

// approvalAnswer is an answer chat takes to an approval: the words that
// give it (the first one is shown) and the decision it makes.
type approvalAnswer struct {
	words    []string
	decision string
}

// approvalAnswers are the answers to an approval in chat. The first word
// of the line picks one; the rest is the reason, sent with the decision.
// "a" (always) approves the tool for the rest of the session: the server
// then resolves its other waiting calls, which leave the queue as their
// resolved events arrive.
var approvalAnswers = []approvalAnswer{
	{words: []string{"y", "yes"}, decision: client.Approve},
	{words: []string{"n", "no"}, decision: client.Deny},
	{words: []string{"a", "always"}, decision: client.Always},
}

// approvalChoices is how the prompt shows the answers.
const approvalChoices = "y/n/a(lways) [reason]"

// askedCall is a tool call waiting for the person's decision.
type askedCall struct {
	runID string
	req   client.ApprovalRequest
}

// asker asks the person in a chat to decide, one at a time and in the
// order the run asked, each tool call that waits for approval, and sends
// each answer. The chat's answer loop hands it the run's events and the
// lines typed while it waits.
type asker struct {
	c         *cli
	sessionID string
	pending   []askedCall // pending[0] is the call being asked about
}

// waiting reports whether a call waits for an answer: the next line
// typed is that answer.
func (a *asker) waiting() bool { return len(a.pending) > 0 }

// see takes in a run event: an approval requested is queued (and asked
// about if it is the first), one resolved elsewhere (another terminal,
// the approval timeout, a cancel) is no longer asked about.
func (a *asker) see(ev client.Event) {
	if req, ok := ev.ApprovalRequest(); ok {
		a.pending = append(a.pending, askedCall{runID: ev.RunID, req: req})
		if len(a.pending) == 1 {
			a.prompt()
		}
		return
	}
	if id, ok := resolvedCall(ev); ok {
		for i, p := range a.pending {
			if p.req.ToolCallID == id {
				a.pending = append(a.pending[:i], a.pending[i+1:]...)
				if i == 0 && a.waiting() {
					a.prompt()
				}
				break
			}
		}
	}
}

// prompt asks about the first pending call. Only a terminal gets the
// question: piped input answers in order without it.
func (a *asker) prompt() {
	if a.c.interactive {
		p := a.pending[0].req
		_, _ = fmt.Fprintf(a.c.stderr, "approve %s(%s)? [%s] ", p.ToolName, shorten(string(p.Arguments), 60), approvalChoices)
	}
}

// answer decides the first pending call with line. A line that is no
// answer is asked again; a call decided meanwhile is said so and skipped.
func (a *asker) answer(line string) error {
	decision, reason, ok := parseApprovalAnswer(line)
	if !ok {
		a.c.note("answer " + approvalChoices)
		a.prompt()
		return nil
	}
	call := a.pending[0]
	_, err := a.c.c.DecideApproval(a.c.ctx, a.sessionID, call.runID, call.req.ToolCallID,
		client.Decision{Decision: decision, Reason: reason})
	var p *client.Problem
	if errors.As(err, &p) && p.Status == http.StatusConflict {
		a.c.note("not decided:", p.Detail) // decided elsewhere, or the run ended
		err = nil
	}
	if err != nil {
		return err
	}
	a.pending = a.pending[1:]
	if a.waiting() {
		a.prompt()
	}
	return nil
}

// abandon leaves the pending calls undecided (the input ended) and says
// how to decide them.
func (a *asker) abandon() {
	for _, p := range a.pending {
		a.c.note(fmt.Sprintf("%s still waits for a decision: kerneld approve %s %s %s [--deny REASON]",
			p.req.ToolName, a.sessionID, p.runID, p.req.ToolCallID))
	}
	a.pending = nil
}

// parseApprovalAnswer reads a line typed as an answer: its decision, and
// the reason that followed the first word.
func parseApprovalAnswer(line string) (decision, reason string, ok bool) {
	word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	for _, ans := range approvalAnswers {
		for _, w := range ans.words {
			if strings.EqualFold(word, w) {
				return ans.decision, strings.TrimSpace(rest), true
			}
		}
	}
	return "", "", false
}

// resolvedCall returns the tool call a kerneld.approval.resolved decided.
func resolvedCall(ev client.Event) (string, bool) {
	if ev.Type != client.Custom || ev.Name != client.CustomApprovalResolved {
		return "", false
	}
	var v struct {
		ToolCallID string `json:"toolCallId"`
	}
	return v.ToolCallID, json.Unmarshal(ev.Value, &v) == nil && v.ToolCallID != ""
}

// shorten writes s on one line of at most n characters.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
