package webhook

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Listing bounds: the page size when none is asked for, and the largest.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
)

// Page is one page of a tenant's deliveries, newest first; Next is the
// cursor of the following page, "" on the last.
type Page struct {
	Items []Delivery
	Next  string
}

// ListPage returns a page of a tenant's deliveries in state ("" for all),
// after cursor (from a previous page's Next), of at most limit (0 for
// DefaultPageSize).
func (d *Dispatcher) ListPage(ctx context.Context, tenant string, state State, cursor string, limit int) (Page, error) {
	if state != "" && !state.Valid() {
		return Page{}, errdefs.Invalid("state", "must be pending, delivered or failed")
	}
	if limit < 0 || limit > MaxPageSize {
		return Page{}, errdefs.Invalid("limit", "must be an integer from 1 to 200")
	}
	q := Query{Tenant: tenant, State: state, Limit: limit}
	if q.Limit == 0 {
		q.Limit = DefaultPageSize
	}
	if cursor != "" {
		c, err := parseCursor(cursor)
		if err != nil {
			return Page{}, err
		}
		q.After = &c
	}
	q.Limit++ // one more says whether there is a next page
	ds, err := d.opts.Outbox.ListDeliveries(ctx, q)
	if err != nil {
		return Page{}, err
	}
	var p Page
	if len(ds) == q.Limit {
		ds = ds[:q.Limit-1]
		last := ds[len(ds)-1]
		p.Next = formatCursor(Cursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	p.Items = ds
	return p, nil
}

// formatCursor encodes c opaquely: clients hand it back, never build it.
func formatCursor(c Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + " " + c.ID))
}

func parseCursor(s string) (Cursor, error) {
	bad := errdefs.Invalid("cursor", "not a cursor this listing gave")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	us, id, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" {
		return Cursor{}, bad
	}
	return Cursor{CreatedAt: time.UnixMicro(n).UTC(), ID: id}, nil
}
