package httpapi

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// textProblem says what is wrong with the text of field: invalid UTF-8
// or a lone surrogate, in a key of the object field (inKey) or in the
// value.
func textProblem(field string, inKey bool, what string) error {
	if inKey {
		what = "has a key that " + what
	} else {
		what = "is " + what
	}
	return errdefs.Invalid(field, what)
}

// checkQueryText refuses query parameters that are not valid UTF-8 once
// unescaped (?name=%ff), naming the parameter.
func checkQueryText(q url.Values) error {
	for name, values := range q {
		if !utf8.ValidString(name) {
			return errdefs.Invalid("query", "has a parameter name that is not valid UTF-8")
		}
		for _, v := range values {
			if !utf8.ValidString(v) {
				return errdefs.Invalid(name, "is not valid UTF-8")
			}
		}
	}
	return nil
}

// firstInvalidUTF8 returns the offset of the first byte of b that does not
// start a valid UTF-8 sequence, or len(b).
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// pathStep is one level of the JSON path a token walk is at: an object
// (with the key whose value comes next) or an array (with the index).
type pathStep struct {
	array   bool
	index   int
	key     string
	wantKey bool // an object expects a key next, not a value
}

// fieldAt names the JSON field of body whose token holds byte off, as
// "metadata.team" or "value.items[2]", and reports whether off is in an
// object key rather than a value (then the field is the object). It walks
// the tokens, using json.Decoder.InputOffset to know where each ends; a
// byte outside any token, or a body that is not JSON up to it, is "body".
// Only refusals call it: a body that decodes is never walked twice.
func fieldAt(body []byte, off int) (field string, inKey bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var path []pathStep
	for {
		tok, err := dec.Token()
		if err != nil {
			return "body", false
		}
		var top *pathStep
		if len(path) > 0 {
			top = &path[len(path)-1]
		}
		str, isString := tok.(string)
		isKey := isString && top != nil && !top.array && top.wantKey
		if dec.InputOffset() > int64(off) {
			if isKey {
				return joinPath(path, false), true
			}
			return joinPath(path, true), false
		}
		switch {
		case isKey:
			top.key, top.wantKey = str, false
		case tok == json.Delim('{'):
			path = append(path, pathStep{wantKey: true})
		case tok == json.Delim('['):
			path = append(path, pathStep{array: true})
		case tok == json.Delim('}') || tok == json.Delim(']'):
			path = path[:len(path)-1]
			valueDone(path)
		default:
			valueDone(path)
		}
	}
}

// valueDone moves the innermost level past the value just read.
func valueDone(path []pathStep) {
	if len(path) == 0 {
		return
	}
	top := &path[len(path)-1]
	if top.array {
		top.index++
	} else {
		top.wantKey = true
	}
}

// joinPath renders path as a field name; withLast includes the key or
// index of the innermost level (the value being read).
func joinPath(path []pathStep, withLast bool) string {
	var b strings.Builder
	for i, p := range path {
		if i == len(path)-1 && !withLast {
			break
		}
		switch {
		case p.array:
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p.key)
		}
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}
