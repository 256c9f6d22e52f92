package kernel

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// Titles. A session without a title gets one when its first run starts:
// an agent on the scripted model (or a kernel with generated titles off)
// takes the first words of the input at once; any other asks its model
// (or its title_model) on a goroutine of its own, bounded by
// Titles.Timeout, so the run never waits for it. The title is recorded
// on the session and logged as kerneld.session.titled by the run, if it
// is still going, else by the session's next run: nothing is ever logged
// between runs.

// DefaultTitleTimeout bounds a title's model call.
const DefaultTitleTimeout = 20 * time.Second

// titleMaxTokens bounds what a title's model call may write.
const titleMaxTokens = 32

// titlePrompt asks a model for a title.
const titlePrompt = `You name conversations for a list of chats. Answer with a title of at most six words for a conversation ` +
	`that starts with the user's message you are given: no quotes, no final punctuation, nothing else.`

// Titles configures how sessions are titled; the zero value titles none.
type Titles struct {
	// Enabled titles the sessions that have no title.
	Enabled bool
	// Generate asks the agent's model for titles; off, titles are the
	// first words of the first input.
	Generate bool
	// Timeout bounds the model call; DefaultTitleTimeout when zero.
	Timeout time.Duration
}

// titleAtStart is called while the first run r of s starts, with the
// session's record about to be saved: it titles s from the input when it
// need not ask a model, and returns the titled event to log then, if
// any, and whether a model is to be asked once the run has started. A
// title generated after an earlier run ended is logged now.
func (k *Kernel) titleAtStart(s *session.Session, spec agents.Spec, r session.Run) (logged []session.Event, ask bool) {
	if s.Title != "" && s.TitleSource != session.TitleFromClient && !s.TitleLogged {
		s.TitleLogged = true
		return []session.Event{session.TitledEvent(r.ID, s.Title, s.TitleSource)}, false
	}
	if !k.titles.Enabled || s.TitleSource != "" || s.Title != "" || r.Kind != "" || strings.TrimSpace(r.Input) == "" {
		return nil, false
	}
	if k.titles.Generate && spec.Model.Provider != "scripted" && spec.Provider != nil {
		return nil, true
	}
	s.Title, s.TitleSource, s.TitleLogged = session.TitleFromText(r.Input), session.TitleFromInput, true
	return []session.Event{session.TitledEvent(r.ID, s.Title, s.TitleSource)}, false
}

// generateTitle asks the agent's model for a title for the session of ar
// on a goroutine the kernel owns, and records it; a failed call falls
// back to the input's first words. The run goes on meanwhile.
func (k *Kernel) generateTitle(ar *activeRun, spec agents.Spec) {
	k.wg.Go(func() {
		ctx, cancel := context.WithTimeout(k.ctx, cmp.Or(k.titles.Timeout, DefaultTitleTimeout))
		defer cancel()
		title, source := k.askTitle(ctx, spec, ar.run), session.TitleFromModel
		if title == "" {
			if k.ctx.Err() != nil {
				return // shutting down: the next run titles it
			}
			title, source = session.TitleFromText(ar.run.Input), session.TitleFromInput
		}
		k.recordTitle(k.ctx, ar, title, source)
	})
}

// askTitle returns the title the model writes for run's input, or "" if
// it fails or writes none.
func (k *Kernel) askTitle(ctx context.Context, spec agents.Spec, run session.Run) string {
	req := llm.Request{
		Model: cmp.Or(spec.TitleModel, run.Model, spec.Model.Name), System: titlePrompt, Purpose: llm.PurposeTitle,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: run.Input}}, MaxTokens: titleMaxTokens, RunInput: run.Input,
	}
	var text strings.Builder
	err := spec.Provider.Stream(ctx, req, func(c llm.Chunk) error {
		text.WriteString(c.Text)
		return nil
	})
	if err != nil {
		k.log.Warn("title model call failed", "session", run.SessionID, "run", run.ID, "err", err)
		return ""
	}
	return session.TitleFromText(text.String())
}

// recordTitle gives the session of ar its title unless it got one
// meanwhile (a client's), and has ar log it if ar is still running.
func (k *Kernel) recordTitle(ctx context.Context, ar *activeRun, title string, source session.TitleSource) {
	id, applied := ar.run.SessionID, false
	var tenant string
	err := k.updateSession(ctx, id, func(s *session.Session) error {
		if s.TitleSource != "" || s.Title != "" {
			return errUnchanged
		}
		s.Title, s.TitleSource, applied, tenant = title, source, true, s.Tenant
		return nil
	})
	if err != nil || !applied {
		if err != nil {
			k.log.Warn("record title", "session", id, "err", err)
		}
		return
	}
	k.feedChanged(tenant, id, FeedSessionTitled)
	if !ar.notices.post(session.TitledEvent(ar.run.ID, title, source)) {
		return // the run has ended: the next one logs it
	}
	err = k.updateSession(ctx, id, func(s *session.Session) error {
		if s.Title != title || s.TitleLogged {
			return errUnchanged
		}
		s.TitleLogged = true
		return nil
	})
	if err != nil {
		k.log.Warn("record title logged", "session", id, "err", err)
	}
}
