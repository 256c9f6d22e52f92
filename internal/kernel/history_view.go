package kernel

import (
	"context"
	"fmt"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// summaryPreamble introduces a compaction summary to the model.
const summaryPreamble = "Summary of the earlier conversation, which is no longer shown:\n\n"

// loadHistory loads the session's model settings and the history the
// model sees: the window of recent messages, cut at the session's latest
// compaction, whose summary stands in for what came before.
func (r *runner) loadHistory(ctx context.Context) error {
	s, err := r.k.store.GetSession(ctx, r.run.SessionID)
	if err != nil {
		return fmt.Errorf("load session: %w", err)
	}
	r.settings = settingsOf(r.spec, s, *r.run)
	r.settings.Model = r.run.Model // as the run recorded it at its start
	msgs, err := r.k.store.RecentMessages(ctx, r.run.SessionID, r.spec.Memory.MaxHistoryMessages)
	if err != nil {
		return fmt.Errorf("load history: %w", err)
	}
	var firstKept int64
	if c := s.Compaction; c != nil {
		r.summary, firstKept = c.Summary, c.FirstKept
	}
	r.history = make([]llm.Message, 0, len(msgs)+8)
	r.positions = make([]int64, 0, len(msgs)+8)
	for _, m := range msgs {
		if m.Position < firstKept || m.Role == session.RoleCompaction {
			continue
		}
		lm, err := r.modelMessage(ctx, m)
		if err != nil {
			return fmt.Errorf("load history: %w", err)
		}
		r.history = append(r.history, lm)
		r.positions = append(r.positions, m.Position)
	}
	return nil
}

// cutWindow cuts the history to the agent's window (see window), and its
// positions with it.
func (r *runner) cutWindow() {
	r.history = window(r.history, r.spec.Memory.MaxHistoryMessages)
	r.positions = r.positions[len(r.positions)-len(r.history):]
}

// modelView returns the messages the next model call sees: the latest
// compaction's summary, then the history window.
func (r *runner) modelView() []llm.Message {
	if r.summary == "" {
		return r.history
	}
	out := make([]llm.Message, 0, len(r.history)+1)
	out = append(out, llm.Message{Role: llm.RoleUser, Content: summaryPreamble + r.summary})
	return append(out, r.history...)
}

// addUsage counts one model call's tokens, in the run's total and per
// model.
func (r *runner) addUsage(model string, u llm.Usage) {
	add := session.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
	r.usage = r.usage.Add(add)
	for i := range r.byModel {
		if r.byModel[i].Model == model {
			r.byModel[i].Usage = r.byModel[i].Add(add)
			return
		}
	}
	r.byModel = append(r.byModel, session.ModelUsage{Provider: r.spec.Model.Provider, Model: model, Usage: add})
}

// recordedSteps returns how many model calls of run runID msgs record,
// the last of them, and the tool calls that have a result.
func recordedSteps(msgs []session.Message, runID string) (int, *session.Message, map[string]bool) {
	steps, answered := 0, map[string]bool{}
	var last *session.Message
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.Role == session.RoleTool:
			answered[m.ToolCallID] = true
		case m.RunID == runID && m.Role == session.RoleAssistant:
			steps, last = steps+1, m
		}
	}
	return steps, last, answered
}
