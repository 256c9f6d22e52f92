package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Problem is an error answer of kerneld: an RFC 9457 problem details
// body (application/problem+json). Switch on Code, which is stable, never
// on Detail:
//
//	var p *client.Problem
//	if errors.As(err, &p) && p.Code == "session_busy" { ... p.ActiveRunID ... }
//
// An error answer that is not a problem body (from a proxy, say) is a
// Problem too, with an empty Code, the status text as Title and the start
// of the body as Detail.
type Problem struct { //nolint:errname // the name RFC 9457 gives it, which users of the API know
	Type      string            `json:"type"`
	Title     string            `json:"title"`
	Status    int               `json:"status"`
	Detail    string            `json:"detail"`
	Code      string            `json:"code"`
	Instance  string            `json:"instance,omitempty"`
	RequestID string            `json:"request_id,omitempty"`
	Errors    map[string]string `json:"errors,omitempty"` // invalid_request: what is wrong, by field

	ActiveRunID string `json:"active_run_id,omitempty"` // session_busy
	RunID       string `json:"run_id,omitempty"`        // idempotency_key_reused
	LastSeq     int64  `json:"last_seq,omitempty"`      // cursor_ahead
	Children    int    `json:"children,omitempty"`      // session_has_children

	// RetryAfter is the Retry-After header of a 429 or 503, or 0.
	RetryAfter time.Duration `json:"-"`
	// Body is the answer's body as received (at most 64 KiB), for members
	// this type does not name.
	Body []byte `json:"-"`
}

// Error implements error.
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kerneld: %d", p.Status)
	if p.Code != "" {
		b.WriteString(" " + p.Code)
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	return b.String()
}

// maxProblemBody bounds what is read of an error answer.
const maxProblemBody = 64 << 10

// readProblem reads an error answer into a *Problem.
func readProblem(res *http.Response) *Problem {
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxProblemBody)) // a short body still tells the status
	p := &Problem{}
	if err := json.Unmarshal(body, p); err != nil || p.Status == 0 {
		p = &Problem{Title: http.StatusText(res.StatusCode), Detail: strings.TrimSpace(string(body))}
		if len(p.Detail) > 512 {
			p.Detail = p.Detail[:512]
		}
	}
	p.Status = res.StatusCode
	p.Body = body
	p.RetryAfter = retryAfter(res.Header)
	return p
}
