package guard

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

// The request types, the type member of every request.
const (
	TypeToolCall  = "tool_call"
	TypeBeforeRun = "before_run"
)

// request is what a guard receives: a signed JSON POST.
type request struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"` // also the webhook-id header
	Timestamp time.Time `json:"timestamp"`
	RunID     string    `json:"run_id"`
	Session   Session   `json:"session"`
	ToolCall  *ToolCall `json:"tool_call,omitempty"`
	Input     *string   `json:"input,omitempty"`  // before_run: the run's input
	Resume    *Resume   `json:"resume,omitempty"` // before_run: the run is being continued
}

// response is what a guard answers.
type response struct {
	Decision   Action          `json:"decision"`
	Reason     string          `json:"reason"`
	Arguments  json.RawMessage `json:"arguments"`
	Annotation string          `json:"annotation"`
}

// maxResponseBytes bounds a guard's answer.
const maxResponseBytes = 256 << 10

// Caller calls guards. One serves every agent.
type Caller struct {
	client    *http.Client
	userAgent string
	now       func() time.Time
}

// NewCaller returns a caller whose requests go out under policy.
func NewCaller(policy webhook.Policy, userAgent string) *Caller {
	// The client's own timeout is a backstop; each call has its guard's.
	return &Caller{client: policy.Client(time.Minute), userAgent: userAgent, now: time.Now}
}

// CheckToolCall asks g whether call may run in sess's run runID.
func (c *Caller) CheckToolCall(ctx context.Context, g Guard, sess Session, runID string, call ToolCall) Decision {
	if len(call.Arguments) == 0 {
		call.Arguments = json.RawMessage("{}")
	}
	return c.call(ctx, g, request{Type: TypeToolCall, RunID: runID, Session: sess, ToolCall: &call},
		Allow, Deny, Ask, Rewrite)
}

// CheckRun asks g whether sess's run runID may start with input, or,
// when resume is set, go on from where a stopped process left it.
func (c *Caller) CheckRun(ctx context.Context, g Guard, sess Session, runID, input string, resume *Resume) Decision {
	return c.call(ctx, g, request{Type: TypeBeforeRun, RunID: runID, Session: sess, Input: &input, Resume: resume},
		Allow, Deny, Annotate)
}

// call sends req to g and reads a decision among allowed; any failure
// yields g's on_failure decision.
func (c *Caller) call(ctx context.Context, g Guard, req request, allowed ...Action) Decision {
	start := c.now()
	req.ID, req.Timestamp = "grd_"+randomHex(), start.UTC()
	res, err := c.post(ctx, g, req)
	if err == nil {
		err = res.check(req.Type, allowed)
	}
	d := Decision{Duration: c.now().Sub(start)}
	if err != nil {
		d.Action, d.Failed, d.Error = Deny, true, err.Error()
		d.Reason = "the guard did not answer: " + err.Error()
		if g.FailOpen {
			d.Action, d.Reason = Allow, ""
		}
		return d
	}
	d.Action, d.Reason, d.Annotation = res.Decision, res.Reason, res.Annotation
	if res.Decision == Rewrite {
		d.Arguments = res.Arguments
	}
	return d
}

// post sends req, signed, and decodes the guard's answer.
func (c *Caller) post(ctx context.Context, g Guard, req request) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return response{}, fmt.Errorf("encode the request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL, bytes.NewReader(body))
	if err != nil {
		return response{}, fmt.Errorf("build the request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", c.userAgent)
	g.Key.SetHeaders(hreq.Header, req.ID, req.Timestamp, body)
	hres, err := c.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return response{}, fmt.Errorf("no answer within %s", g.Timeout)
		}
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return response{}, fmt.Errorf("send: %w", err)
	}
	defer func() { _ = hres.Body.Close() }() // the answer is read; nothing to report
	if hres.StatusCode != http.StatusOK {
		return response{}, fmt.Errorf("the guard answered %d %s, not 200", hres.StatusCode, http.StatusText(hres.StatusCode))
	}
	var res response
	dec := json.NewDecoder(io.LimitReader(hres.Body, maxResponseBytes))
	if err := dec.Decode(&res); err != nil {
		return response{}, fmt.Errorf("read the answer: %w", err)
	}
	return res, nil
}

// check refuses an answer that is not one of allowed, or lacks what its
// decision needs.
func (r response) check(typ string, allowed []Action) error {
	ok := false
	for _, a := range allowed {
		ok = ok || r.Decision == a
	}
	switch {
	case !ok:
		return fmt.Errorf("decision %q is not one a %s guard may give (%v)", r.Decision, typ, allowed)
	case r.Decision == Rewrite && !isObject(r.Arguments):
		return errors.New(`a rewrite needs "arguments", a JSON object`)
	case r.Decision == Annotate && r.Annotation == "":
		return errors.New(`an annotation needs "annotation", a non-empty string`)
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func randomHex() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
