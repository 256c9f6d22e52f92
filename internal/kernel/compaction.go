package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// defaultSummaryPrompt asks for a summary when the agent gives no prompt.
const defaultSummaryPrompt = `You summarise conversations for an assistant that will continue them without seeing them again.
Write a concise summary of the conversation you are given: the user's goals and requests, the facts and decisions established,
what tools returned that still matters, and anything left open. Answer with the summary alone.`

// errNothingToCompact says the history the model sees is no longer than
// what compaction keeps.
var errNothingToCompact = errors.New("nothing to compact: the history is no longer than keep_last")

// estimateTokens estimates what msgs cost a model: a token per 4 bytes of
// text and arguments, and 4 per message. kerneld has no tokenizer for
// every provider; the estimate only decides when to compact.
func estimateTokens(msgs []llm.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += 4 + int64(len(m.Content)+3)/4
		for _, c := range m.ToolCalls {
			n += int64(len(c.Name)+len(c.Arguments)+3) / 4
		}
	}
	return n
}

// over reports whether view passes the policy's threshold.
func over(p agents.CompactionPolicy, view []llm.Message) bool {
	if p.AtMessages > 0 {
		return len(view) > p.AtMessages
	}
	return p.AtTokens > 0 && estimateTokens(view) > int64(p.AtTokens)
}

// maybeCompact compacts the history before a model call when what the
// call would see passes the agent's threshold. A failed summary is
// reported in the stream and the run goes on with the window; only a
// failure to record stops it.
func (r *runner) maybeCompact(ctx context.Context) error {
	p := r.spec.Memory.Compaction
	if p == nil || r.compactFailed {
		return nil
	}
	r.cutWindow()
	if !over(*p, r.modelView()) {
		return nil
	}
	err := r.compact(ctx, *p)
	if _, ok := errors.AsType[*modelError](err); ok || errors.Is(err, errNothingToCompact) {
		r.compactFailed = true // the run goes on with the window, and does not ask again
		return nil
	}
	return err
}

// compactOnDemand is the whole of a compaction run: it compacts with the
// agent's policy, or keeps the last DefaultKeepLast messages for an agent
// without one. A failed summary fails the run as a model error; a history
// too short to compact ends it successfully, saying so.
func (r *runner) compactOnDemand(ctx context.Context) error {
	if err := r.loadHistory(ctx); err != nil {
		return err
	}
	r.cutWindow()
	err := r.compact(ctx, r.spec.CompactionOrDefault())
	if errors.Is(err, errNothingToCompact) {
		return r.emit(
			session.Custom("kerneld.compaction.started", map[string]any{"runId": r.run.ID, "messages": len(r.modelView())}),
			session.Custom("kerneld.compaction.finished", map[string]any{"runId": r.run.ID, "error": err.Error()}),
		)
	}
	return err
}

// compact replaces, for the model, the history before the last KeepLast
// messages by a summary the model writes, and records the compaction
// entry. It announces itself with kerneld.compaction.started and ends
// with kerneld.compaction.finished, which carries the error of a failed
// summary (a *modelError); then the history is left as it was. A history
// no longer than KeepLast is errNothingToCompact, with no events.
func (r *runner) compact(ctx context.Context, p agents.CompactionPolicy) error {
	view := r.modelView()
	split := keptFrom(r.history, p.KeepLast)
	if split == 0 {
		return errNothingToCompact
	}
	before := estimateTokens(view)
	if err := r.emit(session.Custom("kerneld.compaction.started", map[string]any{
		"runId": r.run.ID, "messages": len(view), "tokensBefore": before,
	})); err != nil {
		return err
	}
	model := cmp.Or(p.Model, r.settings.Model)
	summary, err := r.summarise(ctx, p, model, view[:len(view)-len(r.history)+split])
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx) // stopped: the run ends as the stop says
	}
	if err != nil {
		return r.compactionFailed(err)
	}
	kept := r.history[split:]
	entry := session.Message{ID: session.NewMessageID(), Role: session.RoleCompaction, Content: summary,
		Compaction: &session.Compaction{
			FirstKept: r.positions[split], TokensBefore: before, Messages: split, Model: model,
			TokensAfter: estimateTokens(append([]llm.Message{{Role: llm.RoleUser, Content: summaryPreamble + summary}}, kept...)),
		}}
	if err := r.recordCompaction(&entry); err != nil {
		return err
	}
	r.summary, r.history, r.positions = summary, kept, r.positions[split:]
	c := entry.Compaction
	return r.emit(session.Custom("kerneld.compaction.finished", map[string]any{
		"runId": r.run.ID, "messageId": entry.ID, "position": entry.Position, "firstKept": c.FirstKept,
		"tokensBefore": c.TokensBefore, "tokensAfter": c.TokensAfter, "messages": c.Messages, "model": c.Model,
	}))
}

// keptFrom returns the index of the first of msgs that compaction keeps:
// about the last keep of them, starting at a user message as the window
// does (see window). The kept part grows back to the user message that
// opens its turn; when that is the first message, it shrinks to the next
// one; a history without another user message is cut anywhere but at a
// tool result, whose call must stay with it. 0 means nothing to compact.
func keptFrom(msgs []llm.Message, keep int) int {
	cut := max(len(msgs)-keep, 0)
	if cut == 0 {
		return 0
	}
	for i := cut; i > 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return i
		}
	}
	for i := cut + 1; i < len(msgs); i++ {
		if msgs[i].Role == llm.RoleUser {
			return i
		}
	}
	for cut > 0 && msgs[cut].Role == llm.RoleTool {
		cut--
	}
	return cut
}

// compactionFailed reports a summary that failed in the stream and
// returns it, a *modelError.
func (r *runner) compactionFailed(cause error) error {
	r.log.Warn("compaction summary failed", "err", cause)
	if err := r.emit(session.Custom("kerneld.compaction.finished", map[string]any{
		"runId": r.run.ID, "error": cause.Error(),
	})); err != nil {
		return err
	}
	return cause
}

// summarise asks model for a summary of msgs, the part of the model's
// view that compaction replaces, as a transcript in one user message: no
// provider then needs the tool calls in it to match tools it is offered.
func (r *runner) summarise(ctx context.Context, p agents.CompactionPolicy, model string, msgs []llm.Message) (string, error) {
	req := llm.Request{
		Model: model, System: cmp.Or(p.Prompt, defaultSummaryPrompt), Purpose: llm.PurposeSummary,
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: transcript(msgs)}},
		MaxTokens: r.settings.MaxTokens, RunInput: r.run.Input,
	}
	var text strings.Builder
	var usage llm.Usage
	err := r.stream(ctx, req, func(c llm.Chunk) error {
		text.WriteString(c.Text)
		if c.Usage != nil {
			usage = *c.Usage
		}
		return nil
	})
	if err == nil || usage != (llm.Usage{}) {
		r.addUsage(model, usage)
	}
	if err != nil {
		return "", &modelError{err: err}
	}
	summary := strings.TrimSpace(text.String())
	if summary == "" {
		return "", &modelError{err: errors.New("the model wrote an empty summary")}
	}
	return summary, nil
}

// transcript writes msgs as the text a summary is asked for.
func transcript(msgs []llm.Message) string {
	var b strings.Builder
	b.WriteString("Summarise this conversation:\n")
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n[%s]", m.Role)
		if m.IsError {
			b.WriteString(" (error)")
		}
		if m.Content != "" {
			b.WriteString(" " + m.Content)
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "\n[tool call] %s %s", c.Name, c.Arguments)
		}
	}
	return b.String()
}

// recordCompaction appends the compaction entry to the history and makes
// it the session's latest, which the model sees from then on. The events
// before it are made durable first, as record does.
func (r *runner) recordCompaction(entry *session.Message) error {
	if _, err := r.events.flush(); err != nil {
		return &emitError{err: err}
	}
	ctx := r.storeCtx()
	entry.SessionID, entry.RunID, entry.CreatedAt = r.run.SessionID, r.run.ID, r.k.now().UTC()
	msgs := []session.Message{*entry}
	if err := r.k.store.AppendMessages(ctx, r.h.token, msgs...); err != nil {
		return &emitError{err: fmt.Errorf("append compaction: %w", err)}
	}
	entry.Position = msgs[0].Position
	latest := *entry.Compaction
	latest.Position, latest.Summary = entry.Position, entry.Content
	err := r.k.updateSession(ctx, r.run.SessionID, func(s *session.Session) error {
		s.Compaction = &latest
		return nil
	})
	if err != nil {
		return &emitError{err: fmt.Errorf("record compaction: %w", err)}
	}
	return nil
}

// Compact compacts a session's history now, in a run of its own: the
// session must be idle (a busy one is 409 session_busy). It returns the
// run once it has ended and the compaction entry it recorded; none when
// the history was too short to compact or the summary failed (the run
// says why).
func (k *Kernel) Compact(ctx context.Context, sessionID string) (session.Run, *session.Message, error) {
	run, _, err := k.Run(ctx, sessionID, RunRequest{kind: session.RunKindCompaction})
	if err != nil {
		return session.Run{}, nil, err
	}
	sessionID = run.SessionID // the key the session is stored under
	run, err = k.waitRun(ctx, sessionID, run.ID, ended)
	if err != nil {
		return run, nil, err
	}
	s, err := k.store.GetSession(ctx, sessionID)
	if err != nil || s.Compaction == nil {
		return run, nil, err
	}
	msgs, err := k.store.ListMessages(ctx, sessionID, s.Compaction.Position-1, 1)
	if err != nil {
		return run, nil, fmt.Errorf("read compaction: %w", err)
	}
	if len(msgs) == 0 || msgs[0].RunID != run.ID {
		return run, nil, nil // this run compacted nothing
	}
	return run, &msgs[0], nil
}
