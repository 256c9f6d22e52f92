package kernel

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// MaxEventPage is the most events one read returns.
const MaxEventPage = 1000

// Events returns up to limit events of a session with seq > after, in seq
// order. A limit outside 1..MaxEventPage means MaxEventPage.
func (k *Kernel) Events(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error) {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	sessionID = s.ID // the key it is stored under
	if after < 0 {
		return nil, errdefs.Invalid("after", "must not be negative")
	}
	if limit <= 0 || limit > MaxEventPage {
		limit = MaxEventPage
	}
	evs, err := k.store.ReadEvents(ctx, sessionID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return evs, nil
}

// Messages returns a page of a session's conversation history, oldest
// first: for a cleared session, from its latest clear entry on.
func (k *Kernel) Messages(ctx context.Context, sessionID string, page PageRequest) (Page[session.Message], error) {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return Page[session.Message]{}, err
	}
	sessionID = s.ID // the key it is stored under
	limit, err := page.size()
	if err != nil {
		return Page[session.Message]{}, err
	}
	after, err := decodePositionCursor(page.Cursor)
	if err != nil {
		return Page[session.Message]{}, err
	}
	after = max(after, s.ClearedAt-1) // a cleared session's history starts at its clear entry
	msgs, err := k.store.ListMessages(ctx, sessionID, after, limit+1)
	if err != nil {
		return Page[session.Message]{}, fmt.Errorf("list messages: %w", err)
	}
	if len(msgs) <= limit {
		return Page[session.Message]{Items: msgs}, nil
	}
	msgs = msgs[:limit]
	return Page[session.Message]{Items: msgs, Next: encodePositionCursor(msgs[limit-1].Position)}, nil
}

const positionCursorPrefix = "k1:pos:"

func encodePositionCursor(pos int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(positionCursorPrefix + strconv.FormatInt(pos, 10)))
}

func decodePositionCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	s, ok := strings.CutPrefix(string(b), positionCursorPrefix)
	pos, perr := strconv.ParseInt(s, 10, 64)
	if err != nil || !ok || perr != nil || pos < 0 {
		return 0, errdefs.Invalid("cursor", "not a cursor this server issued")
	}
	return pos, nil
}
