package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/kerneld/kerneld/internal/llm"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// responseRecord keeps the status, headers and body of an error response
// of one attempt. The SDK turns error responses into *openai.Error only
// when the body has OpenAI's shape; compatible servers answer
// {"error": "..."} (Ollama) or {"message": ...} (vLLM), which the SDK
// reports as a JSON decoding error that has lost the status.
//
// It also keeps the start of a success that is not labelled an event
// stream: a compatible server that fails after accepting the request may
// answer 200 with a JSON error, and one that ignores "stream": true
// answers with a whole completion. The SDK finds no events in either.
type responseRecord struct {
	status    int
	header    http.Header
	body      []byte
	notStream *bytes.Buffer // the first maxErrorBody bytes of a 2xx that is not text/event-stream
}

// middleware records an error response and hands the SDK an unread copy.
// A success not labelled an event stream goes to the SDK as it comes,
// copying its start aside: if it holds events after all, they stream.
func (rec *responseRecord) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil {
		return res, err
	}
	if res.StatusCode < 400 {
		if !isEventStream(res.Header.Get("Content-Type")) {
			rec.status, rec.header, rec.notStream = res.StatusCode, res.Header, &bytes.Buffer{}
			res.Body = &capture{ReadCloser: res.Body, into: rec.notStream}
		}
		return res, nil
	}
	body, readErr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close() // fully read or abandoned; the copy replaces it
	rec.status, rec.header, rec.body = res.StatusCode, res.Header, body
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, readErr
}

// capture passes a body through, copying its first maxErrorBody bytes.
type capture struct {
	io.ReadCloser
	into *bytes.Buffer
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if room := maxErrorBody - c.into.Len(); room > 0 {
		c.into.Write(p[:min(n, room)])
	}
	return n, err
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && media == "text/event-stream"
}

// notStreamError explains a success response that was not an event
// stream: the error its JSON body carries, as streamError reads one sent
// inside a stream, or else that the server did not stream.
func (c *Client) notStreamError(rec *responseRecord) error {
	if body := rec.notStream.Bytes(); errorMessage(body) != "" {
		return c.streamError(body)
	}
	return &llm.ResponseError{Provider: providerName, Problem: fmt.Sprintf(
		"the server answered %d with %q instead of an event stream; check that its base URL is a Chat Completions API that supports streaming",
		rec.status, cmp.Or(rec.header.Get("Content-Type"), "no Content-Type"))}
}

// classify turns a failed stream into an error safe to show: an
// *llm.APIError for an error response or an error sent inside the stream,
// else what llm.TransportError makes of it.
func (c *Client) classify(err error, rec *responseRecord) error {
	if se, ok := errors.AsType[*ssestream.StreamError](err); ok {
		return c.streamError(se.Event.Data)
	}
	status, msg := rec.status, errorMessage(rec.body)
	header := rec.header
	if ae, ok := errors.AsType[*openai.Error](err); ok {
		status, msg = cmp.Or(ae.StatusCode, status), cmp.Or(ae.Message, msg)
		if ae.Response != nil {
			header = ae.Response.Header
		}
	}
	if status < 400 {
		return llm.TransportError(providerName, err)
	}
	e := &llm.APIError{Provider: providerName, StatusCode: status, Status: http.StatusText(status),
		Message: llm.SafeMessage(msg, c.apiKey)}
	if header != nil {
		e.RetryAfter, _ = llm.RetryAfter(header.Get, time.Now())
	}
	return e
}

// streamError maps an error a server sent as a stream event, such as
// {"error": {"message": "...", "code": 503}} (vLLM) or OpenAI's
// {"error": {"message": "...", "type": "server_error"}}. A numeric code
// stands for its HTTP status, so an overloaded server is retried.
func (c *Client) streamError(data []byte) error {
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(data, &ev) // the SDK found an "error" member, so it parses
	var body struct {
		Code json.RawMessage `json:"code"`
		Type string          `json:"type"`
	}
	_ = json.Unmarshal(ev.Error, &body) // absent members stay empty
	status, _ := strconv.Atoi(string(body.Code))
	if status < 400 || status > 599 {
		status = 0
		if body.Type == "server_error" {
			status = http.StatusInternalServerError
		}
	}
	return &llm.APIError{Provider: providerName, StatusCode: status, Status: http.StatusText(status),
		Message: llm.SafeMessage(errorMessage(data), c.apiKey)}
}

// errorMessage finds the human-readable message in an error body of the
// shapes OpenAI-compatible servers use: {"error": {"message"}},
// {"error": "..."}, {"message": "..."} or {"detail": "..."}. A body that is
// none of these yields "": raw bodies are never shown.
func errorMessage(body []byte) string {
	var b struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	var nested struct {
		Message string `json:"message"`
	}
	var flat string
	switch {
	case json.Unmarshal(b.Error, &nested) == nil && nested.Message != "":
		return nested.Message
	case json.Unmarshal(b.Error, &flat) == nil && flat != "":
		return flat
	case b.Message != "":
		return b.Message
	}
	if s, ok := b.Detail.(string); ok {
		return s
	}
	return ""
}
