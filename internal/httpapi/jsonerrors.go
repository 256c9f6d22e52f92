package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// bodyError turns an error of readJSON into a 400 that names the field
// ("agent", "metadata.team", "messages[2].content"; for a problem in a
// key, the object that holds it) in a client's words: never the
// decoder's wording nor a Go type. What went wrong is read from the body
// at the offset the decoder reports, not from its messages, which are not
// part of its API.
func bodyError(body []byte, err error) error {
	if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		return syntaxError(body, se)
	}
	if se, ok := errors.AsType[*jsonv2.SemanticError](err); ok {
		return semanticError(body, se)
	}
	return invalidBody("malformed JSON")
}

// invalidBody is a problem with the body as a whole.
func invalidBody(what string) error {
	return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidRequest, "request body: %s", what)
}

// syntaxError explains a body that is not one well-formed JSON value.
func syntaxError(body []byte, se *jsontext.SyntacticError) error {
	off := int(min(max(se.ByteOffset, 0), int64(len(body))))
	switch {
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		return errdefs.Invalid(memberField(body, off, se.JSONPointer),
			"is given more than once; send each member once")
	case len(bytes.TrimSpace(body)) == 0:
		return invalidBody("a JSON object is required")
	}
	if bad := firstInvalidUTF8(body); bad <= off && bad < len(body) {
		field, inKey := fieldAt(body, bad)
		return textProblem(field, inKey, fmt.Sprintf("not valid UTF-8 (byte %d of the body)", bad))
	}
	if esc, ok := loneSurrogate(body[off:]); ok {
		field, inKey := fieldAt(body, off)
		return textProblem(field, inKey, fmt.Sprintf(
			"not text: %s is half of a UTF-16 surrogate pair and encodes no character (byte %d of the body)", esc, off))
	}
	switch {
	case errors.Is(se.Err, io.ErrUnexpectedEOF):
		return invalidBody("truncated JSON")
	case off > 0 && jsontext.Value(bytes.TrimSpace(body[:off])).IsValid():
		return invalidBody("unexpected data after the JSON value")
	}
	return invalidBody(fmt.Sprintf("malformed JSON at byte %d", off))
}

// loneSurrogate reports whether b starts with a \u escape of a UTF-16
// surrogate, and returns it: the decoder stops at one that is not the
// high half of a pair followed by its low half.
func loneSurrogate(b []byte) (string, bool) {
	if len(b) < 6 || b[0] != '\\' || (b[1] != 'u' && b[1] != 'U') {
		return "", false
	}
	n, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	if err != nil || n < 0xD800 || n > 0xDFFF {
		return "", false
	}
	return string(b[:6]), true
}

// semanticError explains a well-formed body that does not fit the
// request: an unknown member, or a value of the wrong type.
func semanticError(body []byte, se *jsonv2.SemanticError) error {
	off := int(min(max(se.ByteOffset, 0), int64(len(body))))
	if errors.Is(se.Err, jsonv2.ErrUnknownName) {
		return errdefs.Invalid(memberField(body, off, se.JSONPointer), unknownMember(se.GoType, se.JSONPointer.LastToken()))
	}
	field, _ := fieldAt(body, off)
	return errdefs.Invalid(field, typeProblem(se))
}

// memberField names the member whose name starts at byte off of body:
// the object that holds it (fieldAt) and then the name, the last token of
// ptr.
func memberField(body []byte, off int, ptr jsontext.Pointer) string {
	name := ptr.LastToken()
	object, _ := fieldAt(body, off)
	if object == "body" {
		return name
	}
	return object + "." + name
}

// unknownMember says a member is not one of the request's, pointing at
// the one it differs from only in case: names are matched exactly.
func unknownMember(t reflect.Type, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.Struct {
		for f := range t.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag != "" && tag != "-" && strings.EqualFold(tag, name) {
				return fmt.Sprintf("unknown field; names are matched exactly: did you mean %q?", tag)
			}
		}
	}
	return "unknown field"
}

// typeProblem says what a value should have been, and what it was.
func typeProblem(se *jsonv2.SemanticError) string {
	want, got := "a JSON value", jsonKindName(se.JSONKind)
	if se.GoType != nil {
		want = jsonKind(se.GoType.Kind().String())
	}
	switch {
	case got == "":
		return "must be " + want
	case got == want && want == "a number":
		return "must be an integer in range"
	}
	return "must be " + want + ", not " + got
}

// jsonKindName names a JSON kind as a client would; "" when unknown.
func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return ""
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
