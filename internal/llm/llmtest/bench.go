package llmtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
)

// BenchTokens is how many text tokens a benchmarked completion streams.
const BenchTokens = 200

// BenchWords returns the text tokens of a benchmarked completion: words
// of a few letters, each with its leading space, as models stream them.
func BenchWords() []string {
	words := strings.Fields("the quick brown fox jumps over a lazy dog while kerneld streams")
	out := make([]string, BenchTokens)
	for i := range out {
		out[i] = " " + words[i%len(words)]
	}
	return out
}

// BenchStream measures one streamed completion through the client dial
// builds: each iteration sends a request to a local server that answers
// with body, a whole event stream written at once, and reads it to the
// end. The server records nothing, so what the benchmark allocates is the
// client's work, plus the server's writing of a prepared body.
func (a Adapter) BenchStream(b *testing.B, contentType string, body []byte) {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	p := a.Dial(b, &Server{srv: srv}, nil)
	want := strings.Join(BenchWords(), "")
	var text strings.Builder
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		text.Reset()
		err := p.Stream(b.Context(), Hello, func(c llm.Chunk) error {
			text.WriteString(c.Text)
			return nil
		})
		require.NoError(b, err)
		require.Equal(b, want, text.String())
	}
}
