package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// InboxItem is one approval waiting for a person's decision, with the
// session and run it belongs to: what an inbox across sessions lists.
type InboxItem struct {
	Approval
	SessionID string // as the client knows it
	Agent     string
	RunID     string
}

// InboxRequest asks for a page of the caller's pending approvals.
type InboxRequest struct {
	Agent string // only sessions of this agent; "" for all
	Page  PageRequest
}

// maxInboxSessions bounds the waiting sessions one inbox read looks at.
// A session waits only while a person owes it a decision, so a tenant
// with more than this many is far past what an inbox can show anyway.
const maxInboxSessions = 10000

// Inbox returns a page of the approvals waiting in the caller's tenant,
// across its sessions, oldest request first (so the next to expire comes
// first). It reads the sessions waiting for input and the approvals their
// active runs asked for, as the per-run route does; a decision is made on
// that route with the item's session, run and tool call ids.
func (k *Kernel) Inbox(ctx context.Context, req InboxRequest) (Page[InboxItem], error) {
	limit, err := req.Page.size()
	if err != nil {
		return Page[InboxItem]{}, err
	}
	after, err := decodeInboxCursor(req.Page.Cursor)
	if err != nil {
		return Page[InboxItem]{}, err
	}
	waiting, err := k.store.ListSessions(ctx, SessionQuery{
		Tenant: TenantFrom(ctx), Agent: req.Agent, State: session.StateWaitingInput, Limit: maxInboxSessions,
	})
	if err != nil {
		return Page[InboxItem]{}, fmt.Errorf("list waiting sessions: %w", err)
	}
	var items []InboxItem
	for _, s := range waiting {
		pending, err := k.pendingOf(ctx, s)
		if err != nil {
			return Page[InboxItem]{}, err
		}
		items = append(items, pending...)
	}
	slices.SortFunc(items, compareInbox)
	items = slices.DeleteFunc(items, func(it InboxItem) bool { return after != nil && compareInbox(it, *after) <= 0 })
	return paginate(items, limit, inboxPlace), nil
}

// pendingOf returns the approvals session s's active run still waits on.
func (k *Kernel) pendingOf(ctx context.Context, s session.Session) ([]InboxItem, error) {
	if s.ActiveRunID == "" {
		return nil, nil
	}
	run, err := k.store.GetRun(ctx, s.ID, s.ActiveRunID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, nil // deleted since the listing
	}
	if err != nil {
		return nil, fmt.Errorf("get run: %w", err)
	}
	if run.State.Terminal() {
		return nil, nil
	}
	evs, err := k.runEvents(ctx, run)
	if err != nil {
		return nil, err
	}
	var out []InboxItem
	for _, a := range approvalsOf(evs, run.ID, false) {
		if _, decided := run.Decided(a.ToolCallID); a.State == ApprovalPending && !decided {
			out = append(out, InboxItem{Approval: a, SessionID: session.PublicID(s.ID), Agent: s.Agent, RunID: run.ID})
		}
	}
	return out, nil
}

// compareInbox orders the inbox: by request time, then session and tool
// call, so that a cursor names one place.
func compareInbox(a, b InboxItem) int {
	return cmp.Or(a.RequestedAt.Compare(b.RequestedAt), strings.Compare(a.SessionID, b.SessionID),
		strings.Compare(a.ToolCallID, b.ToolCallID))
}

// inboxPlace is where an item stands in the inbox: its request time in
// nanoseconds, its session and its tool call.
func inboxPlace(it InboxItem) string {
	return strconv.FormatInt(it.RequestedAt.UnixNano(), 10) + "|" + it.SessionID + "|" + it.ToolCallID
}

// decodeInboxCursor returns the item an inbox cursor names, nil for the
// first page.
func decodeInboxCursor(c string) (*InboxItem, error) {
	place, err := decodeCursor(c)
	if err != nil || place == "" {
		return nil, err
	}
	parts := strings.SplitN(place, "|", 3)
	if len(parts) != 3 {
		return nil, errdefs.Invalid("cursor", "not a cursor this server issued")
	}
	ns, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return nil, errdefs.Invalid("cursor", "not a cursor this server issued")
	}
	return &InboxItem{Approval: Approval{RequestedAt: time.Unix(0, ns), ToolCallID: parts[2]}, SessionID: parts[1]}, nil
}
