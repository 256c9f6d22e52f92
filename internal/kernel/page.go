package kernel

import (
	"encoding/base64"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
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

// encodeCursor makes an opaque cursor from the last id of a page.
func encodeCursor(lastID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + lastID))
}

// decodeCursor returns the id inside a cursor made by encodeCursor.
func decodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	id, ok := strings.CutPrefix(string(b), cursorPrefix)
	if err != nil || !ok || !validID(id) {
		return "", errdefs.Invalid("cursor", "not a cursor this server issued")
	}
	return id, nil
}

// paginate trims items fetched with limit+1 to one page and sets Next.
func paginate[T any](items []T, limit int, id func(T) string) Page[T] {
	if len(items) <= limit {
		return Page[T]{Items: items}
	}
	items = items[:limit]
	return Page[T]{Items: items, Next: encodeCursor(id(items[len(items)-1]))}
}
