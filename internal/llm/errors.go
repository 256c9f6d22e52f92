package llm

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// The kernel shows a failed model call's error text to clients (RUN_ERROR
// message), so the errors adapters return are built from the parts below,
// which never hold an API key or a raw response body.

// APIError is an error response from a model API, reduced to what is safe
// to show a client: the HTTP status and the API's own error message. It
// matches errdefs.ErrUpstream.
type APIError struct {
	Provider   string // "openai", "anthropic"
	StatusCode int    // HTTP status; for an error sent inside a stream, the status its type stands for
	Status     string // the status text, e.g. "Too Many Requests"
	Message    string // the API's message, cleaned with SafeMessage
	// RetryAfter is the wait the server asked for before a retry; 0 when
	// it asked for none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider + ": ")
	if e.StatusCode > 0 {
		b.WriteString(strconv.Itoa(e.StatusCode))
		if e.Status != "" {
			b.WriteString(" " + e.Status)
		}
	} else {
		b.WriteString("error")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Is makes an APIError match errdefs.ErrUpstream.
func (e *APIError) Is(target error) bool { return target == errdefs.ErrUpstream }

// Temporary reports whether the request may succeed if sent again: on a
// timeout, a conflict, a rate limit or a server error, but not when the
// request itself was refused (400, 401, 403, 404, ...).
func (e *APIError) Temporary() bool {
	switch e.StatusCode {
	case 408, 409, 429:
		return true
	}
	return e.StatusCode >= 500
}

// ConnectionError is a call that got no complete response: the connection
// failed or dropped, the stream ended early, or the attempt timed out. It
// is always retryable (before output started) and matches
// errdefs.ErrUpstream.
type ConnectionError struct {
	Provider string
	Err      error // what happened, in words safe to show
}

func (e *ConnectionError) Error() string { return e.Provider + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ConnectionError) Unwrap() error { return e.Err }

// Is makes a ConnectionError match errdefs.ErrUpstream.
func (e *ConnectionError) Is(target error) bool { return target == errdefs.ErrUpstream }

// ResponseError is a response the API sent but that cannot be used:
// malformed data, a refusal, a filtered answer. It is not retried and
// matches errdefs.ErrUpstream.
type ResponseError struct {
	Provider string
	Problem  string // what was wrong, in words safe to show
}

func (e *ResponseError) Error() string { return e.Provider + ": " + e.Problem }

// Is makes a ResponseError match errdefs.ErrUpstream.
func (e *ResponseError) Is(target error) bool { return target == errdefs.ErrUpstream }

// Retryable reports whether a failed attempt may be retried: a temporary
// *APIError or a *ConnectionError.
func Retryable(err error) bool {
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.Temporary()
	}
	_, ok := errors.AsType[*ConnectionError](err)
	return ok
}

// TransportError classifies a failure that is not an error response from
// the API. A network failure or a body cut short becomes a
// *ConnectionError; malformed JSON, or an event stream line too long to
// read, a *ResponseError. Anything else is reported without its text,
// which may come from a library that quotes the response.
func TransportError(provider string, err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err // its text repeats the URL; the cause is what matters
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var netErr net.Error
	switch {
	case errors.As(err, &syntax), errors.As(err, &typ), errors.Is(err, ErrSSETooLong):
		return &ResponseError{Provider: provider, Problem: "malformed response: " + err.Error()}
	case errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &ConnectionError{Provider: provider, Err: errors.New("connection failed: " + err.Error())}
	}
	return &ConnectionError{Provider: provider, Err: errors.New("request failed")}
}

// ErrIncomplete is the cause of a *ConnectionError for a stream that ended
// without its final event, as when a proxy drops an idle connection.
var ErrIncomplete = errors.New("stream ended before the response was complete")

// maxMessage bounds an API message in an error, in runes.
const maxMessage = 300

// SafeMessage cleans an API's error message for showing to a client: each
// secret (the API key) is replaced, whitespace is collapsed and the text is
// cut to a few hundred characters.
func SafeMessage(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if utf8.RuneCountInString(msg) > maxMessage {
		msg = string([]rune(msg)[:maxMessage]) + "…"
	}
	return msg
}

// RetryAfter reads how long a server asked a client to wait before
// retrying: retry-after-ms (milliseconds, which OpenAI sends) or
// Retry-After (seconds, or an HTTP date relative to now). header looks up a
// response header, e.g. http.Header.Get.
func RetryAfter(header func(string) string, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(header("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(header("retry-after"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || math.IsInf(s, 0) || math.IsNaN(s) || s > math.MaxInt64/float64(time.Second) {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	for _, layout := range []string{time.RFC1123, time.RFC850, time.ANSIC} {
		if t, err := time.Parse(layout, v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	return 0, false
}
