package llm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"
)

// Endpoint is a model API's streaming endpoint, as the network adapters
// call it: one POST of a JSON body whose response is an event stream. It
// owns the HTTP exchange of an attempt, so that both adapters send, cancel
// and classify failures the same way; each adapter owns its wire format,
// the body it sends and the events it reads. Its fields are set once, by
// the adapter's constructor; it is safe for concurrent use.
type Endpoint struct {
	Provider string       // prefixes every error, e.g. "openai"
	URL      string       // where requests go
	Header   http.Header  // sent with every request (content type, credentials)
	Client   *http.Client // nil: http.DefaultClient
	Secret   string       // the API key, scrubbed from every message shown
	// ErrorMessage returns the human-readable message of an error body in
	// the API's shapes, or "" for a body it does not know: raw bodies are
	// never shown.
	ErrorMessage func(body []byte) string
	// StreamError maps an error the API sent inside a 200 response: as an
	// event of the stream, or as a JSON body instead of the stream.
	StreamError func(data []byte) error
	// Expected says what a base URL must point at, for the error of a
	// success that was not an event stream: "a Chat Completions API that
	// supports streaming".
	Expected string
}

// Stream sends body and hands each event of the response's stream to
// handle, in order, until handle reports the stream's final event (done),
// the stream ends or handle fails; the caller's reader then knows whether
// the response was complete. It returns handle's error unchanged.
//
// The request and the stream run under ctx: ending ctx closes the
// connection at once, and Stream then returns ctx's error, so that
// CallPolicy.Do can tell a caller who left from an attempt that ran out of
// time. Any other failure is an error safe to show: an *APIError for an
// error response, else what TransportError makes of it.
func (e *Endpoint) Stream(ctx context.Context, body []byte, handle func(SSEEvent) (done bool, err error)) error {
	res, err := e.post(ctx, body)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }() // ends the stream if it is not over; nothing to report
	if isEventStream(res.Header.Get("Content-Type")) {
		return e.read(ctx, res.Body, handle)
	}
	// A success not labelled an event stream is read as one all the same,
	// in case it is one, keeping its start to explain it if it is not.
	start := &bodyStart{r: res.Body}
	events := 0
	err = e.read(ctx, start, func(ev SSEEvent) (bool, error) {
		events++
		return handle(ev)
	})
	if err != nil || events > 0 {
		return err
	}
	return e.notStreamError(res, start.b)
}

// post sends the request and returns the response of a success; an error
// response comes back as the error it stands for.
func (e *Endpoint) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: build request: %w", e.Provider, err)
	}
	req.Header = e.Header.Clone()
	res, err := cmp.Or(e.Client, http.DefaultClient).Do(req)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, TransportError(e.Provider, err)
	case res.StatusCode >= 400:
		defer func() { _ = res.Body.Close() }() // read as far as needed; nothing to report
		return nil, e.responseError(res)
	}
	return res, nil
}

// responseError maps an error response to an *APIError: its status, the
// message its body carries and the wait it asks for before a retry.
func (e *Endpoint) responseError(res *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody)) // a body cut short just has no message
	ae := &APIError{Provider: e.Provider, StatusCode: res.StatusCode, Status: StatusText(res.StatusCode),
		Message: SafeMessage(e.ErrorMessage(body), e.Secret)}
	ae.RetryAfter, _ = RetryAfter(res.Header.Get, time.Now())
	return ae
}

// read reads an event stream into handle.
func (e *Endpoint) read(ctx context.Context, body io.Reader, handle func(SSEEvent) (bool, error)) error {
	events := NewSSEReader(body)
	for {
		ev, err := events.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return TransportError(e.Provider, err)
		}
		if done, err := handle(ev); done || err != nil {
			return err
		}
	}
}

// notStreamError explains a success that held no event: the error its
// JSON body carries, or else that the server did not stream. A compatible
// server that fails after accepting the request may answer 200 with a
// JSON error, and one that ignores "stream": true answers with a whole
// response.
func (e *Endpoint) notStreamError(res *http.Response, start []byte) error {
	if e.ErrorMessage(start) != "" {
		return e.StreamError(start)
	}
	return &ResponseError{Provider: e.Provider, Problem: fmt.Sprintf(
		"the server answered %d with %q instead of an event stream; check that its base URL is %s",
		res.StatusCode, cmp.Or(res.Header.Get("Content-Type"), "no Content-Type"), e.Expected)}
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && media == "text/event-stream"
}

// maxErrorBody bounds how much of an error response, or of a success
// that is not an event stream, is read to explain it.
const maxErrorBody = 64 << 10

// bodyStart passes a body through, keeping a copy of its first
// maxErrorBody bytes in b.
type bodyStart struct {
	r io.Reader
	b []byte
}

func (s *bodyStart) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if room := maxErrorBody - len(s.b); room > 0 {
		s.b = append(s.b, p[:min(n, room)]...)
	}
	return n, err
}

// statusOverloaded is the status Anthropic's API answers when overloaded.
const statusOverloaded = 529

// StatusText is http.StatusText, which also names the 529 Anthropic's API
// answers when it is overloaded.
func StatusText(status int) string {
	if status == statusOverloaded {
		return "Overloaded"
	}
	return http.StatusText(status)
}
