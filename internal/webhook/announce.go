package webhook

import (
	"encoding/json"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// The announcements of each event type, built from what the kernel holds
// when the event happens. Each sets Key so that announcing the same fact
// again (a retried write, a continued run) yields the same deliveries.

// AnnounceRunEnded announces a run's end: run.finished when it succeeded,
// run.cancelled when it was cancelled or interrupted, run.failed
// otherwise.
func AnnounceRunEnded(s session.Session, r session.Run) Announcement {
	typ := RunFailed
	switch r.State {
	case session.RunSucceeded:
		typ = RunFinished
	case session.RunCancelled, session.RunInterrupted:
		typ = RunCancelled
	}
	data := map[string]any{
		"state": string(r.State),
		"usage": map[string]any{"input_tokens": r.Usage.InputTokens, "output_tokens": r.Usage.OutputTokens},
	}
	if !r.StartedAt.IsZero() {
		data["started_at"] = r.StartedAt.UTC()
	}
	if r.Error != nil {
		data["error"] = map[string]any{"code": r.Error.Code, "message": r.Error.Message}
	}
	return announcement(s, typ, "run/"+r.ID+"/ended", r.ID, r.EndedAt, data)
}

// AnnounceApprovalRequested announces a tool call that waits for a decision.
func AnnounceApprovalRequested(s session.Session, runID, toolCallID, toolName string, args json.RawMessage, at time.Time) Announcement {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return announcement(s, ApprovalRequested, "approval/"+toolCallID+"/requested", runID, at, map[string]any{
		"tool_call_id": toolCallID, "tool_name": toolName, "arguments": args,
	})
}

// AnnounceApprovalDecided announces a tool call's decision: "approved" or
// "denied" (by a person, by the timeout, or because the run ended).
func AnnounceApprovalDecided(s session.Session, runID, toolCallID, toolName, decision, reason string, at time.Time) Announcement {
	data := map[string]any{"tool_call_id": toolCallID, "tool_name": toolName, "decision": decision}
	if reason != "" {
		data["reason"] = reason
	}
	return announcement(s, ApprovalDecided, "approval/"+toolCallID+"/decided", runID, at, data)
}

// AnnounceSessionClosed announces that a session was closed, or deleted.
func AnnounceSessionClosed(s session.Session, reason string, at time.Time) Announcement {
	data := map[string]any{}
	if reason != "" {
		data["reason"] = reason
	}
	return announcement(s, SessionClosed, "closed", "", at, data)
}

// AnnounceQuotaExceeded announces that a tenant's quota refused something in
// session s (s.ID "" when no session was involved, such as a session
// that could not be created): which quota, and what it refused.
func AnnounceQuotaExceeded(s session.Session, quota, detail string, at time.Time) Announcement {
	// One per quota, session and minute: a client retrying a refused
	// request every second must not flood the receivers.
	key := "quota/" + quota + "/" + at.UTC().Truncate(time.Minute).Format(time.RFC3339)
	return announcement(s, QuotaExceeded, key, "", at, map[string]any{"quota": quota, "detail": detail})
}

func announcement(s session.Session, typ, key, runID string, at time.Time, data map[string]any) Announcement {
	return Announcement{Type: typ, Key: key, Tenant: s.Tenant, Agent: s.Agent, SessionID: s.ID, RunID: runID,
		Time: at, Data: data}
}
