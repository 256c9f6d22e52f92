package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// FeedKind says what changed about a session, in its tenant's feed.
type FeedKind string

// Feed kinds the kernel reports. Status changes, run ends and approvals
// are read from the events the kernel emits (see the feed package).
const (
	FeedSessionCreated FeedKind = "session.created"
	FeedSessionUpdated FeedKind = "session.updated"
	FeedSessionTitled  FeedKind = "session.titled"
	FeedSessionClosed  FeedKind = "session.closed"
	FeedSessionDeleted FeedKind = "session.deleted"
	FeedSessionRead    FeedKind = "session.read"
)

// FeedSink records changes to sessions in their tenant's feed. It must
// not block: it is called with the change made, on the caller's path.
type FeedSink interface {
	// SessionChanged says session id of tenant changed as kind says. For
	// a deleted session, last is its record as it was; else nil, and the
	// sink reads the record itself.
	SessionChanged(tenant, id string, kind FeedKind, last *session.Session)
}

// feedChanged tells the feed, if there is one, that a session changed.
func (k *Kernel) feedChanged(tenant, id string, kind FeedKind) {
	if k.feed != nil {
		k.feed.SessionChanged(tenant, id, kind, nil)
	}
}

// FeedSummary is what a tenant's feed says about a session.
type FeedSummary struct {
	Tenant           string            `json:"tenant"`
	ID               string            `json:"id"`
	Agent            string            `json:"agent"`
	Title            string            `json:"title,omitempty"`
	Name             string            `json:"name,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Status           session.Status    `json:"status"`
	UpdatedAt        time.Time         `json:"updated_at"`
	LastSeq          int64             `json:"last_seq"`
	PendingApprovals int               `json:"pending_approvals"`
	// ReadCursors are the readers' cursors (see session.SessionExt), from
	// which a stream works out its reader's unread count.
	ReadCursors map[string]int64 `json:"read_cursors,omitempty"`
	// Replies are the seqs of the session's latest assistant messages
	// (see session.SessionExt.Replies).
	Replies []int64 `json:"replies,omitempty"`
}

// Unread returns how many of the session's assistant messages reader has
// not read.
func (s *FeedSummary) Unread(reader string) int {
	return session.UnreadOf(s.Replies, s.ReadCursors, reader)
}

// SummaryOf is s's summary from its record alone.
func SummaryOf(s session.Session) FeedSummary {
	return FeedSummary{
		Tenant: s.Tenant, ID: s.ID, Agent: s.Agent, Title: s.Title, Name: s.Name, Metadata: s.Metadata,
		Status: session.StatusOf(&s), UpdatedAt: s.UpdatedAt.UTC(), LastSeq: s.LastSeq, ReadCursors: s.ReadCursors,
		Replies: s.Replies,
	}
}

// FeedSummary returns the summary of the session stored under id, of any
// tenant: its status as GET /sessions/{id} says it and how many tool
// calls of its active run wait for a decision.
func (k *Kernel) FeedSummary(ctx context.Context, id string) (FeedSummary, error) {
	s, err := k.store.GetSession(ctx, id)
	if err != nil {
		return FeedSummary{}, fmt.Errorf("get session: %w", err)
	}
	sum := SummaryOf(s)
	if sum.Status, err = k.SessionStatus(ctx, s); err != nil {
		return FeedSummary{}, err
	}
	if s.ActiveRunID == "" {
		return sum, nil
	}
	run, err := k.store.GetRun(ctx, s.ID, s.ActiveRunID)
	if err != nil {
		return sum, nil //nolint:nilerr // a run gone meanwhile has nothing pending
	}
	pending, err := k.pendingApprovals(ctx, run)
	if err != nil {
		return FeedSummary{}, err
	}
	sum.PendingApprovals = len(pending)
	return sum, nil
}
