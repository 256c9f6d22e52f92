package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

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

// decode reads exactly one JSON value from the body into a T and checks its
// shape. Text that is not UTF-8, unknown fields, wrong types and trailing
// data are errors. The body is read whole first (limitBody caps it) so
// that its bytes can be checked as sent.
func decode[T validator](r *http.Request) (T, error) {
	var v T
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return v, decodeError(err)
	}
	if err := checkBodyText(body); err != nil {
		return v, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, errdefs.New(errdefs.ErrInvalid, "invalid_request", "request body: unexpected data after the JSON value")
	}
	return v, v.Validate()
}

// decodeError turns an encoding/json error into a client-facing one that
// names the field and never a Go type.
func decodeError(err error) error {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return mbe
	}
	if errors.Is(err, errRequestTimeout) {
		return err
	}
	if errors.Is(err, io.EOF) {
		return errdefs.New(errdefs.ErrInvalid, "invalid_request", "request body: a JSON object is required")
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := te.Field
		if field == "" {
			field = "body"
		}
		return errdefs.Invalid(field, "must be "+jsonKind(te.Type.Kind().String())+", not "+jsonValueKind(te.Value))
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return errdefs.New(errdefs.ErrInvalid, "invalid_request", "request body: malformed JSON at byte %d", se.Offset)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field, _ := strconv.Unquote(name)
		return errdefs.Invalid(field, "unknown field")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errdefs.New(errdefs.ErrInvalid, "invalid_request", "request body: truncated JSON")
	}
	return errdefs.New(errdefs.ErrInvalid, "invalid_request", "request body: %v", err)
}

// jsonKind names a Go reflect kind as the JSON type a client sends.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "bool":
		return "a boolean"
	case "ptr", "interface":
		return "a JSON value"
	}
	return "a number"
}

// jsonValueKind names the JSON value encoding/json describes ("number -5",
// "bool", "string", ...) the way a client would.
func jsonValueKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "bool":
		return "a boolean"
	case "number":
		return "a number"
	case "string":
		return "a string"
	case "object":
		return "an object"
	case "array":
		return "an array"
	}
	return v
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
