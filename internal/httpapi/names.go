package httpapi

import (
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Names, ids and keys are text that other text is matched against: in
// store keys, URLs, log lines and filters. NUL ends a string in C, in
// PostgreSQL and in many tools downstream, so a name holding one is read
// as another name; it is refused in every name, id and key a client sends.
// Free text (an input, a reason, a memory value) keeps it.

// nulProblem is the problem of a name, id or key that holds NUL.
const nulProblem = `must not contain NUL (\u0000)`

// checkNoNUL adds a problem for field if s holds NUL.
func checkNoNUL(v *errdefs.ValidationError, field, s string) *errdefs.ValidationError {
	if strings.IndexByte(s, 0) >= 0 {
		return v.Add(field, nulProblem)
	}
	return v
}

// checkMetadataNUL checks metadata's keys (a problem of field, which
// holds them) and values (of field.key) for NUL.
func checkMetadataNUL[V string | *string](v *errdefs.ValidationError, field string, md map[string]V) *errdefs.ValidationError {
	for key, val := range md {
		if strings.IndexByte(key, 0) >= 0 {
			v = v.Add(field, "has a key that "+nulProblem)
			continue
		}
		var s string
		switch x := any(val).(type) {
		case string:
			s = x
		case *string:
			if x != nil {
				s = *x
			}
		}
		v = checkNoNUL(v, field+"."+key, s)
	}
	return v
}

// checkMemoryKeys checks the keys of a session's initial memory, each a
// problem of field.key (of field, for a key holding NUL).
func checkMemoryKeys[V any](v *errdefs.ValidationError, field string, m map[string]V) *errdefs.ValidationError {
	for key := range m {
		err := session.ValidateMemoryKey(key)
		switch {
		case err == nil:
		case strings.IndexByte(key, 0) >= 0:
			v = v.Add(field, "has a key that "+nulProblem)
		default:
			v = v.Add(field+"."+key, err.Error())
		}
	}
	return v
}

// clientIDProblem is the problem of an id a client chose badly.
const clientIDProblem = "must be " + session.ClientIDRule
