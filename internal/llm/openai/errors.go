package openai

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/kerneld/kerneld/internal/llm"
)

// streamError maps an error a server sent as a stream event, such as
// {"error": {"message": "...", "code": 503}} (vLLM) or OpenAI's
// {"error": {"message": "...", "type": "server_error"}}. A numeric code
// stands for its HTTP status, so an overloaded server is retried.
func (c *Client) streamError(data []byte) error {
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(data, &ev) // a body without an error member has no code or type
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
