package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// handlerFunc is an http.HandlerFunc that reports failure by returning an
// error instead of writing one. It must return nil once it has written.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts h to http.HandlerFunc; every error goes through writeError.
func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// validator is implemented by every request body type.
type validator interface{ Validate() error }

// The rules request bodies are read by (github.com/go-json-experiment/json,
// the proposed encoding/json/v2): member names match exactly, a member
// given twice, text that is not UTF-8 and a lone UTF-16 surrogate escape
// are errors, never resolved silently (encoding/json took the last
// duplicate, matched names in any case and stored U+FFFD for both kinds of
// bad text). strictJSON also refuses members the request type does not
// have; looseJSON ignores them, for AG-UI's RunAgentInput, which clients
// extend.
var (
	strictJSON = jsonv2.RejectUnknownMembers(true)
	looseJSON  = jsonv2.RejectUnknownMembers(false)
)

// decode reads exactly one JSON value from the body into a T by the
// strict rules and checks its shape. Every handler that reads a JSON
// body goes through it (or through readJSON, for a body it has read).
func decode[T validator](r *http.Request) (T, error) {
	var v T
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return v, readError(err)
	}
	if err := readJSON(body, &v, strictJSON); err != nil {
		return v, err
	}
	return v, v.Validate()
}

// readJSON decodes body, one JSON value and nothing after it, into v
// under opts. A refusal is a 400 naming the field and never a Go type.
func readJSON(body []byte, v any, opts jsonv2.Options) error {
	if err := jsonv2.Unmarshal(body, v, opts); err != nil {
		return bodyError(body, err)
	}
	return nil
}

// unmarshalPart decodes raw, a part of a body readJSON has accepted (so
// valid JSON, UTF-8 and without duplicate names), into v by the body's
// naming rules; its error is for the caller to name.
func unmarshalPart(raw []byte, v any, opts jsonv2.Options) error {
	return jsonv2.Unmarshal(raw, v, opts)
}

// readError turns a failure to read the body into the client's problem.
func readError(err error) error {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return mbe
	}
	if errors.Is(err, errRequestTimeout) {
		return err
	}
	return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidRequest, "request body: %v", err)
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return writeBody(w, status, v)
}

// writeBody marshals v before writing anything, so a marshal failure can
// still become a clean error response.
func writeBody(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // the client may be gone; nothing to do about it
	return nil
}

// marshalWithExtra marshals v (a struct) and adds the members of extra.
func marshalWithExtra(v any, extra map[string]any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	x, err := json.Marshal(extra)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1])
	buf.WriteByte(',')
	buf.Write(x[1:])
	return buf.Bytes(), nil
}

// formatBytes renders a byte count for messages.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
