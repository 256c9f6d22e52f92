package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
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
type responseRecord struct {
	status int
	header http.Header
	body   []byte
}

// middleware records an error response and hands the SDK an unread copy.
func (rec *responseRecord) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	body, readErr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close() // fully read or abandoned; the copy replaces it
	rec.status, rec.header, rec.body = res.StatusCode, res.Header, body
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, readErr
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
