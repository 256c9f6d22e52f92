// Package webhook tells other systems what happened in kerneld without
// them holding a stream open: it turns what the kernel announces (a run
// ended, an approval is wanted, a session closed, a quota ran out) into
// signed HTTP POSTs, kept in a durable outbox until a receiver takes them.
//
// It owns:
//   - the payloads and their Standard Webhooks signatures (webhook-id,
//     webhook-timestamp, webhook-signature: v1,<base64 HMAC-SHA256 of
//     id.timestamp.body>), so receivers verify with existing libraries;
//   - where deliveries go (Targets: the operator's endpoints in config,
//     per tenant, per agent and per session) and which secret signs them;
//   - the outbox contract (Outbox), which the stores implement and
//     webhook/outboxtest checks;
//   - delivery (Dispatcher): at least once, by one replica at a time
//     through claims that expire, retried with backoff for a bounded time,
//     then dead-lettered where GET /webhooks/deliveries?state=failed shows
//     it, until it is redelivered;
//   - outbound HTTP that never reaches a link-local or cloud-metadata
//     address unless the operator allows it (Policy), enforced on the
//     address actually dialled, so DNS cannot get around it.
//
// Guard calls (internal/guard) are signed and sent the same way.
package webhook

import (
	"slices"
	"time"
)

// The event types a webhook can be sent for: the type member of every
// payload, and what an endpoint's events list names.
const (
	RunFinished       = "run.finished"       // a run succeeded
	RunFailed         = "run.failed"         // a run ended with RUN_ERROR
	RunCancelled      = "run.cancelled"      // a run was cancelled or interrupted
	ApprovalRequested = "approval.requested" // a tool call waits for a decision
	ApprovalDecided   = "approval.decided"   // a tool call's approval was decided
	SessionClosed     = "session.closed"     // a session was closed (by a client, TTL or deletion)
	QuotaExceeded     = "quota.exceeded"     // a tenant's quota refused a session, run or tokens
)

// AllEvents in an endpoint's events list subscribes it to every type.
const AllEvents = "*"

// EventTypes lists every event type, in the order the docs give them.
var EventTypes = []string{RunFinished, RunFailed, RunCancelled, ApprovalRequested, ApprovalDecided, SessionClosed, QuotaExceeded}

// KnownEvent reports whether name is an event type or AllEvents.
func KnownEvent(name string) bool { return name == AllEvents || slices.Contains(EventTypes, name) }

// Endpoint is a receiver and the events it wants.
type Endpoint struct {
	URL    string
	Events []string // event types, or AllEvents
	// Secret signs its deliveries ("whsec_" + base64); "" signs them with
	// the tenant's secret, or else the default one (see Targets).
	Secret string
}

// Wants reports whether e subscribed to event type t.
func (e Endpoint) Wants(t string) bool {
	return slices.Contains(e.Events, t) || slices.Contains(e.Events, AllEvents)
}

// Announcement is something that happened which receivers may want to
// hear of: the kernel makes one for each event type above.
type Announcement struct {
	Type string // one of the event types
	// Key names the fact within its session, e.g. "run/<id>/ended" or
	// "approval/<tool call id>/requested": the deliveries of one fact get
	// the same ids however often it is announced, so a retried write or a
	// continued run adds no second delivery.
	Key       string
	Tenant    string
	Agent     string
	SessionID string
	RunID     string
	Time      time.Time
	// Data holds the type's own members (state, usage, error, tool call),
	// beside tenant, agent, session_id and run_id.
	Data map[string]any
	// Endpoints are the agent's and the session's own endpoints, which
	// Targets adds to the configured ones.
	Endpoints []Endpoint
}
