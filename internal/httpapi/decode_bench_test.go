package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// BenchmarkDecode measures reading the body of the create and run routes,
// from the request to a validated request value, with the decoder the API
// uses (github.com/go-json-experiment/json under strictJSON) and, in the
// same run, with the one it replaced (encoding/json with unknown fields
// refused, after a UTF-8 pass over the body). docs/benchmarks.md has the
// figures.
func BenchmarkDecode(b *testing.B) {
	input := func(size int) string { return strings.Repeat("héllo wörld ", size/13) }
	for _, bc := range []struct {
		route string
		body  []byte
		read  func(body []byte, baseline bool) error
	}{
		{"create", []byte(`{"agent":"echo","name":"support: order 1042","metadata":{"user":"u-1042","team":"support"}}`),
			readAs[createSessionRequest]},
		{"run/1KiB", []byte(`{"input":"` + input(1<<10) + `","if_busy":"queue"}`), readAs[createRunRequest]},
		{"run/256KiB", []byte(`{"input":"` + input(256<<10) + `","if_busy":"queue"}`), readAs[createRunRequest]},
	} {
		for _, decoder := range []string{"encoding-json", "json-v2"} {
			b.Run(bc.route+"/"+decoder, func(b *testing.B) {
				b.SetBytes(int64(len(bc.body)))
				b.ReportAllocs()
				for b.Loop() {
					if err := bc.read(bc.body, decoder == "encoding-json"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// readAs decodes body as a T the way a handler does, or with the baseline.
func readAs[T validator](body []byte, baseline bool) error {
	r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
	if baseline {
		_, err := decodeEncodingJSON[T](r)
		return err
	}
	_, err := decode[T](r)
	return err
}

// decodeEncodingJSON is the decoder the API used before, kept as the
// benchmark's baseline: the body read whole, checked to be UTF-8, then
// decoded by encoding/json with unknown fields refused and nothing after
// the value.
func decodeEncodingJSON[T validator](r *http.Request) (T, error) {
	var v T
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return v, err
	}
	if !utf8.Valid(body) {
		return v, errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, errors.New("data after the value")
	}
	return v, v.Validate()
}
