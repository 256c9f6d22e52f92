package kernel

import (
	"context"
	"encoding/json"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/webhook"
)

// Announcer is where the kernel announces what other systems may want to
// hear of (runs ended, approvals requested and decided, sessions closed,
// quotas exceeded): internal/webhook turns announcements into signed
// deliveries from a durable outbox.
type Announcer interface {
	// CheckSessionEndpoints validates the webhooks a session of tenant
	// names at creation.
	CheckSessionEndpoints(tenant string, es []webhook.Endpoint) error
	// Announce durably stores the deliveries of as and says how many.
	Announce(ctx context.Context, as ...webhook.Announcement) (int, error)
	// Notify says that what was announced is durable and may be delivered.
	Notify()
}

// announceEvents announces what evs, about to be appended, tell of. It is
// written ahead of the events: a process killed between the two has the
// deliveries already, and whoever continues the run announces the same
// facts again under the same ids (see webhook.Announcement.Key), which
// adds nothing. It reports whether anything was announced. A failure is
// logged, never the run's: the append is what matters.
func (k *Kernel) announceEvents(ctx context.Context, evs []session.Event) bool {
	if k.announcer == nil {
		return false
	}
	var found []*session.Event
	for i := range evs {
		if announceable(&evs[i]) {
			found = append(found, &evs[i])
		}
	}
	if len(found) == 0 {
		return false
	}
	s, err := k.store.GetSession(ctx, found[0].SessionID)
	if err != nil {
		k.log.Error("announce events", "session", found[0].SessionID, "err", err)
		return false
	}
	var as []webhook.Announcement
	for _, ev := range found {
		as = append(as, k.announcementsOf(ctx, s, ev)...)
	}
	return k.announce(ctx, s, as...)
}

// announce adds session s's endpoints, and its agent's, to as and
// announces them.
func (k *Kernel) announce(ctx context.Context, s session.Session, as ...webhook.Announcement) bool {
	endpoints := k.endpointsOf(s)
	for i := range as {
		as[i].Endpoints = endpoints
	}
	n, err := k.announcer.Announce(ctx, as...)
	if err != nil {
		k.log.Error("announce", "session", s.ID, "err", err)
	}
	return n > 0
}

// announceRunEnded announces the end of run, which ended without events
// of its own (it never started, or its start could not be logged), and
// reports whether anything was announced. Like announceEvents, it is
// written ahead of the record that ends the run; a failure is logged.
func (k *Kernel) announceRunEnded(ctx context.Context, run session.Run) bool {
	if k.announcer == nil {
		return false
	}
	s, err := k.store.GetSession(ctx, run.SessionID)
	if err != nil {
		k.log.Error("announce run ended", "session", run.SessionID, "run", run.ID, "err", err)
		return false
	}
	return k.announce(ctx, s, webhook.AnnounceRunEnded(s, run))
}

// announceable reports whether ev is one that webhooks announce.
func announceable(ev *session.Event) bool {
	switch ev.Type {
	case session.EventRunFinished, session.EventRunError:
		return true
	case session.EventCustom:
		name := ev.Member("name")
		return name == approvalRequested || name == approvalResolved
	}
	return false
}

// announcementsOf returns what ev, an announceable event of session s,
// announces.
func (k *Kernel) announcementsOf(ctx context.Context, s session.Session, ev *session.Event) []webhook.Announcement {
	v := customValue(ev)
	switch ev.Member("name") {
	case approvalRequested:
		args, _ := json.Marshal(v["arguments"])
		return []webhook.Announcement{webhook.AnnounceApprovalRequested(s, ev.RunID, str(v, "toolCallId"), str(v, "toolName"), args, ev.Time)}
	case approvalResolved:
		callID := str(v, "toolCallId")
		decision := resolvedState(str(v, "decision"))
		if decision == ApprovalCancelled {
			decision = ApprovalDenied // by the run's end, as the reason says
		}
		return []webhook.Announcement{webhook.AnnounceApprovalDecided(s, ev.RunID, callID,
			k.approvalToolName(ctx, s.ID, ev.RunID, callID), decision, str(v, "reason"), ev.Time)}
	}
	run, err := k.store.GetRun(ctx, s.ID, ev.RunID)
	if err != nil {
		run = session.Run{ID: ev.RunID, SessionID: s.ID}
	}
	end := endingOf(ev)
	run.State, run.Error, run.Usage, run.EndedAt = end.runState, end.runErr, usageOf(ev), ev.Time
	out := []webhook.Announcement{webhook.AnnounceRunEnded(s, run)}
	if end.runErr != nil && end.runErr.Code == session.ErrorCodeQuotaExceeded {
		out = append(out, webhook.AnnounceQuotaExceeded(s, "tokens", end.runErr.Message, ev.Time))
	}
	return out
}

// approvalToolName returns the tool of the call whose approval run runID
// requested, from the run's log; "" if it cannot be read.
func (k *Kernel) approvalToolName(ctx context.Context, sessionID, runID, callID string) string {
	run, err := k.store.GetRun(ctx, sessionID, runID)
	if err != nil {
		return ""
	}
	evs, err := k.runEvents(ctx, run)
	if err != nil {
		return ""
	}
	for _, a := range approvalsOf(evs, runID, false) {
		if a.ToolCallID == callID {
			return a.ToolName
		}
	}
	return ""
}

// usageOf sums the usage of a run's terminal event, one entry per model.
func usageOf(ev *session.Event) session.Usage {
	var u session.Usage
	entries, _ := ev.Fields()["usage"].([]any)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		in, _ := m["inputTokens"].(float64)
		out, _ := m["outputTokens"].(float64)
		u.InputTokens += int64(in)
		u.OutputTokens += int64(out)
	}
	return u
}

// endpointsOf returns the webhooks of session s and of its agent.
func (k *Kernel) endpointsOf(s session.Session) []webhook.Endpoint {
	var out []webhook.Endpoint
	if spec, err := k.agents.Get(s.Agent); err == nil {
		for _, w := range spec.Webhooks {
			out = append(out, webhook.Endpoint{URL: w.URL, Events: w.Events})
		}
	}
	for _, w := range s.Webhooks {
		out = append(out, webhook.Endpoint{URL: w.URL, Events: w.Events})
	}
	return out
}

// announceClosed announces that session id was closed (or is being
// deleted), and has it delivered.
func (k *Kernel) announceClosed(ctx context.Context, id, reason string) {
	if k.announcer == nil {
		return
	}
	s, err := k.store.GetSession(ctx, id)
	if err != nil {
		k.log.Error("announce session closed", "session", id, "err", err)
		return
	}
	if k.announce(ctx, s, webhook.AnnounceSessionClosed(s, reason, k.now())) {
		k.announcer.Notify()
	}
}

// AnnounceQuotaExceeded announces that the caller's tenant's quota refused
// something: quota names which, detail what. sessionID is the session it
// happened in, "" when none.
func (k *Kernel) AnnounceQuotaExceeded(ctx context.Context, sessionID, quota, detail string) {
	if k.announcer == nil {
		return
	}
	s := session.Session{Tenant: TenantFrom(ctx)}
	if sessionID != "" {
		if got, err := k.GetSession(ctx, sessionID); err == nil {
			s = got
		}
	}
	if k.announce(ctx, s, webhook.AnnounceQuotaExceeded(s, quota, detail, k.now())) {
		k.announcer.Notify()
	}
}

// sessionWebhooks checks and converts the webhooks a session names at
// creation.
func (k *Kernel) sessionWebhooks(tenant string, ws []session.Webhook) error {
	if len(ws) == 0 {
		return nil
	}
	if k.announcer == nil {
		return errdefs.Invalid("webhooks", "this server sends no webhooks: it has no webhooks.secret, or its store keeps no outbox")
	}
	es := make([]webhook.Endpoint, len(ws))
	for i, w := range ws {
		es[i] = webhook.Endpoint{URL: w.URL, Events: w.Events}
	}
	if err := k.announcer.CheckSessionEndpoints(tenant, es); err != nil {
		return errdefs.Invalid("webhooks", err.Error())
	}
	return nil
}
