package anthropic

import (
	"encoding/json"
	"net/http"

	"github.com/kerneld/kerneld/internal/llm"
)

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
	"overloaded_error":      529,
}

// errorBody is the body of an error response and the data of an error
// event: {"type": "error", "error": {"type": "...", "message": "..."}}.
type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// streamError maps an error the API sent inside a 200 response, as an
// error event or as the body, to the status its type stands for, so that
// an overloaded API is retried and a refused request is not.
func (c *Client) streamError(data []byte) error {
	var body errorBody
	_ = json.Unmarshal(data, &body) // a body of another shape is a server error without a message
	status := statusOfType[body.Error.Type]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return &llm.APIError{Provider: providerName, StatusCode: status, Status: llm.StatusText(status),
		Message: llm.SafeMessage(body.Error.Message, c.apiKey)}
}

// errorMessage returns the message of an error body, or "" for any other
// body: raw bodies are never shown.
func errorMessage(body []byte) string {
	var b errorBody
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	return b.Error.Message
}
