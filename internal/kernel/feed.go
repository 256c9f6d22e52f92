package kernel

import "github.com/kerneld/kerneld/internal/session"

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
