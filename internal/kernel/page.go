package kernel

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// MaxPageSize is the largest page a list returns.
const MaxPageSize = 200

// DefaultPageSize is the page size when the caller does not ask for one.
const DefaultPageSize = 50

// Page is one page of a list and the cursor of the next, "" on the last.
type Page[T any] struct {
	Items []T
	Next  string
}

// PageRequest asks for a page: Cursor is a previous page's Next, or "".
type PageRequest struct {
	Limit  int
	Cursor string
}

// size returns the validated page size.
func (p PageRequest) size() (int, error) {
	switch {
	case p.Limit == 0:
		return DefaultPageSize, nil
	case p.Limit < 0 || p.Limit > MaxPageSize:
		return 0, errdefs.Invalid("limit", "must be between 1 and 200")
	}
	return p.Limit, nil
}

// cursorPrefix versions the opaque cursor format.
const cursorPrefix = "k1:"

// encodeCursor makes an opaque cursor from the place of the last item of a
// page.
func encodeCursor(place string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + place))
}

// decodeCursor returns the place inside a cursor made by encodeCursor.
func decodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	place, ok := strings.CutPrefix(string(b), cursorPrefix)
	if err != nil || !ok || place == "" || len(place) > maxCursorPlace {
		return "", errdefs.Invalid("cursor", "not a cursor this server issued")
	}
	return place, nil
}

// maxCursorPlace bounds what a cursor may carry.
const maxCursorPlace = 512

// sessionPlace is where a session stands in a listing: its creation time
// in microseconds and its id, which no id contains a "|" of.
func sessionPlace(s session.Session) string {
	return strconv.FormatInt(s.CreatedAt.UnixMicro(), 10) + "|" + s.ID
}

// sessionCursor returns the listing position a session cursor's place
// names, nil for the first page.
func sessionCursor(place string) (*session.Cursor, error) {
	if place == "" {
		return nil, nil
	}
	micros, id, ok := strings.Cut(place, "|")
	us, err := strconv.ParseInt(micros, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, errdefs.Invalid("cursor", "not a cursor this server issued")
	}
	return &session.Cursor{CreatedAt: time.UnixMicro(us).UTC(), ID: id}, nil
}

// paginate trims items fetched with limit+1 to one page and sets Next from
// the place of the page's last item.
func paginate[T any](items []T, limit int, place func(T) string) Page[T] {
	if len(items) <= limit {
		return Page[T]{Items: items}
	}
	items = items[:limit]
	return Page[T]{Items: items, Next: encodeCursor(place(items[len(items)-1]))}
}
