package httpapi

import (
	"strings"
	"testing"
)

func TestFieldAt(t *testing.T) {
	tests := []struct {
		body      string // BAD stands for a byte that is not UTF-8
		wantField string
		wantKey   bool
	}{
		{`{"input":"BAD"}`, "input", false},
		{`{"a":1,"b":"x","input":"ok BAD"}`, "input", false},
		{`{"metadata":{"x":"1","team":"BAD"}}`, "metadata.team", false},
		{`{"metadata":{"x":"1","teBADam":"a"}}`, "metadata", true},
		{`{"value":[1,[2,"BAD"]]}`, "value[1][1]", false},
		{`{"value":[{"a":null},{"b":{"c":"BAD"}}]}`, "value[1].b.c", false},
		{`{"skip":{"deep":[1,2,{"x":true}]},"name":"BAD"}`, "name", false},
		{`{"BAD":1}`, "body", true},
		{`["BAD"]`, "[0]", false},
		{`"BAD"`, "body", false},
		{`BAD`, "body", false},
		{`{"a": 1 BAD}`, "body", false},
	}
	for _, tt := range tests {
		body := []byte(strings.ReplaceAll(tt.body, "BAD", "\xff"))
		off := firstInvalidUTF8(body)
		if off != strings.Index(tt.body, "BAD") {
			t.Fatalf("%q: first invalid byte at %d, want %d", body, off, strings.Index(tt.body, "BAD"))
		}
		field, inKey := fieldAt(body, off)
		if field != tt.wantField || inKey != tt.wantKey {
			t.Errorf("fieldAt(%q, %d) = %q, %v, want %q, %v", body, off, field, inKey, tt.wantField, tt.wantKey)
		}
	}
}
