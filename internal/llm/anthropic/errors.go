package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/kerneld/kerneld/internal/llm"
)

// statusOverloaded is Anthropic's status for an overloaded API.
const statusOverloaded = 529

// statusOfType gives the HTTP status an error type stands for, for errors
// the API sends inside a stream that began 200 OK. An unknown type counts
// as a server error.
var statusOfType = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      statusOverloaded,
}

// classify turns a failed stream into an error safe to show. The SDK's
// *anthropic.Error quotes the raw body in its text, so only its status,
// type and the message inside the body are used.
func (c *Client) classify(err error) error {
	ae, ok := errors.AsType[*anthropic.Error](err)
	if !ok {
		return llm.TransportError(providerName, err)
	}
	status := ae.StatusCode
	if status < 400 {
		status = statusOfType[string(ae.Type())]
		if status == 0 {
			status = http.StatusInternalServerError
		}
	}
	e := &llm.APIError{Provider: providerName, StatusCode: status, Status: statusText(status),
		Message: llm.SafeMessage(errorMessage(ae.RawJSON()), c.apiKey)}
	if ae.StatusCode >= 400 && ae.Response != nil {
		e.RetryAfter, _ = llm.RetryAfter(ae.Response.Header.Get, time.Now())
	}
	return e
}

// errorMessage returns the message of an error body,
// {"type": "error", "error": {"type": "...", "message": "..."}}, or "" for
// any other body: raw bodies are never shown.
func errorMessage(raw string) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) != nil {
		return ""
	}
	return body.Error.Message
}

// statusText is http.StatusText with Anthropic's 529.
func statusText(status int) string {
	if status == statusOverloaded {
		return "Overloaded"
	}
	return http.StatusText(status)
}
