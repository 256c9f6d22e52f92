package httpapi

import (
	"bytes"
	"net/http/httptest"
	"strconv"
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

// BenchmarkCheckBodyText measures the UTF-8 check of request bodies: a
// valid body costs one utf8.Valid pass; only an invalid one pays for the
// token walk that names its field.
func BenchmarkCheckBodyText(b *testing.B) {
	input := func(size int, tail string) []byte {
		text := strings.Repeat("héllo wörld ", size/13)
		return []byte(`{"input":"` + text + tail + `","if_busy":"queue"}`)
	}
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"valid/1KiB", input(1<<10, "")},
		{"valid/256KiB", input(256<<10, "")},
		{"invalid-at-end/1KiB", input(1<<10, "\xff")},
		{"invalid-at-end/256KiB", input(256<<10, "\xff")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				_ = checkBodyText(bc.body)
			}
		})
	}
}

// BenchmarkDecodeRun measures decode of a run request whole: body read,
// UTF-8 check and JSON decoding, to set the check's cost against it.
func BenchmarkDecodeRun(b *testing.B) {
	for _, size := range []int{1 << 10, 256 << 10} {
		body := []byte(`{"input":"` + strings.Repeat("héllo wörld ", size/13) + `","if_busy":"queue"}`)
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/sessions/x/run", bytes.NewReader(body))
				if _, err := decode[createRunRequest](r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
