package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// doBody sends body as a request body. With chunked, the client does not
// know the length, so the request has no Content-Length.
func (ts *testServer) doBody(t *testing.T, method, path, body string, chunked bool) response {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // an unknown length: net/http sends it chunked
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func TestErrors_BodyTooLarge(t *testing.T) {
	// The run route, whose input may carry images, has a limit of its own.
	ts := newServer(t, serverOptions{api: httpapi.Options{MaxImageBodyBytes: 2 << 20}})
	id := ts.createSession(t, "echo")
	const limit = 1 << 20
	pad := func(prefix, suffix string, size int) string {
		return prefix + strings.Repeat("x", size-len(prefix)-len(suffix)) + suffix
	}
	bodies := []struct {
		name, method, path, body string
	}{
		{"CreateSession", "POST", "/sessions", pad(`{"agent":"echo","name":"`, `"}`, limit+1)},
		{"CreateSessionTrailingSpace", "POST", "/sessions", `{"agent":"echo"}` + strings.Repeat(" ", limit)},
		{"UpdateSession", "PATCH", "/sessions/" + id, pad(`{"name":"`, `"}`, limit+1)},
		{"CreateRun", "POST", "/sessions/" + id + "/run", pad(`{"input":"`, `"}`, 2*limit+1)},
		{"PutMemory", "PUT", "/sessions/" + id + "/memory/k", pad(`{"value":"`, `"}`, limit+1)},
	}
	for _, b := range bodies {
		want := "1 MiB"
		if b.name == "CreateRun" {
			want = "2 MiB"
		}
		for _, chunked := range []bool{false, true} {
			name := b.name
			if chunked {
				name += "Chunked"
			}
			t.Run(name, func(t *testing.T) {
				res := ts.doBody(t, b.method, b.path, b.body, chunked)
				p := wantProblem(t, res, http.StatusRequestEntityTooLarge, "body_too_large")
				if !strings.Contains(p["detail"].(string), want) {
					t.Errorf("detail = %q, want the limit of %s named", p["detail"], want)
				}
			})
		}
	}

	t.Run("AtLimit", func(t *testing.T) {
		for _, chunked := range []bool{false, true} {
			body := `{"agent":"echo"}` + strings.Repeat(" ", limit-len(`{"agent":"echo"}`))
			if res := ts.doBody(t, "POST", "/sessions", body, chunked); res.status != http.StatusCreated {
				t.Errorf("a body of exactly 1 MiB (chunked %v) = %d %s, want 201", chunked, res.status, res.body)
			}
		}
	})

	t.Run("NothingStored", func(t *testing.T) {
		s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
		if s["name"] != nil || s["last_seq"] != float64(0) {
			t.Errorf("session after rejected bodies = %v, want unchanged", s)
		}
		wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/memory/k", ""), http.StatusNotFound, "memory_key_not_found")
	})
}

func TestErrors_BodyLimitConfigured(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{MaxBodyBytes: 100}})
	body := `{"agent":"echo","name":"` + strings.Repeat("n", 100) + `"}`
	for _, chunked := range []bool{false, true} {
		p := wantProblem(t, ts.doBody(t, "POST", "/sessions", body, chunked), http.StatusRequestEntityTooLarge, "body_too_large")
		if !strings.Contains(p["detail"].(string), "100 bytes") {
			t.Errorf("detail = %q, want the limit of 100 bytes named", p["detail"])
		}
	}
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`)
}

func TestErrors_RequestIDsDiffer(t *testing.T) {
	ts := newServer(t, serverOptions{})
	seen := map[string]bool{}
	for range 5 {
		p := wantProblem(t, ts.do(t, "GET", "/agents/nope", ""), http.StatusNotFound, "agent_not_found")
		id := p["request_id"].(string)
		if seen[id] {
			t.Fatalf("request_id %q repeated", id)
		}
		seen[id] = true
	}
}

func TestErrors_Decoding(t *testing.T) {
	ts := newServer(t, serverOptions{})
	// One body shape per decoder failure, each sent to every JSON route,
	// so no route decodes differently.
	id := ts.createSession(t, "echo")
	routes := []struct{ name, method, path, valid string }{
		{"CreateSession", "POST", "/sessions", `"agent":"echo"`},
		{"UpdateSession", "PATCH", "/sessions/" + id, `"name":"n"`},
		{"CreateRun", "POST", "/sessions/" + id + "/run", `"input":"hi"`},
		{"PutMemory", "PUT", "/sessions/" + id + "/memory/k", `"value":1`},
	}
	for _, r := range routes {
		v := r.valid
		runErrorCases(t, ts, []errorCase{
			{name: r.name + "UnknownField", method: r.method, path: r.path, body: `{` + v + `,"extra":1}`,
				status: 400, code: "invalid_request", field: "extra", fieldHas: "unknown field"},
			{name: r.name + "Array", method: r.method, path: r.path, body: `[{` + v + `}]`,
				status: 400, code: "invalid_request", field: "body", fieldHas: "must be an object"},
			{name: r.name + "String", method: r.method, path: r.path, body: `"text"`,
				status: 400, code: "invalid_request", field: "body", fieldHas: "must be an object"},
			{name: r.name + "Malformed", method: r.method, path: r.path, body: `{` + v + `,}`,
				status: 400, code: "invalid_request"},
			{name: r.name + "Truncated", method: r.method, path: r.path, body: `{` + v,
				status: 400, code: "invalid_request"},
			{name: r.name + "Trailing", method: r.method, path: r.path, body: `{` + v + `}{` + v + `}`,
				status: 400, code: "invalid_request"},
			{name: r.name + "Empty", method: r.method, path: r.path,
				status: 400, code: "invalid_request"},
			{name: r.name + "Whitespace", method: r.method, path: r.path, body: " \n\t",
				status: 400, code: "invalid_request"},
		})
	}
	if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions", "")); len(ids) != 1 {
		t.Errorf("sessions = %v, want only the fixture", ids)
	}
}

func TestErrors_Panic(t *testing.T) {
	var mode atomic.Value
	mode.Store("before")
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "before":
			panic("the metrics registry is on fire: secret=hunter2")
		case "after":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "kerneld_up 1\n")
			w.(http.Flusher).Flush()
			panic("half-way")
		case "abort":
			panic(http.ErrAbortHandler)
		}
	})
	ts := newServer(t, serverOptions{api: httpapi.Options{Metrics: metrics}})

	t.Run("BeforeWrite", func(t *testing.T) {
		p := wantProblem(t, ts.do(t, "GET", "/metrics", ""), http.StatusInternalServerError, "internal")
		if p["detail"] != "internal error" {
			t.Errorf("detail = %q, want %q", p["detail"], "internal error")
		}
		ts.must(t, http.StatusOK, "GET", "/healthz", "")
		ts.createSession(t, "echo")
	})

	t.Run("AfterWrite", func(t *testing.T) {
		// Once the response is under way a problem cannot replace it; the
		// client must see a broken response, not JSON spliced into it.
		mode.Store("after")
		req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ts.Client().Do(req)
		if err == nil {
			b, rerr := io.ReadAll(res.Body)
			res.Body.Close()
			if rerr == nil && strings.Contains(string(b), "problem") {
				t.Errorf("a panic after the response began gave %d %q: a problem appended to the partial body", res.StatusCode, b)
			}
		}
		ts.must(t, http.StatusOK, "GET", "/healthz", "")
	})

	t.Run("Abort", func(t *testing.T) {
		mode.Store("abort")
		req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := ts.Client().Do(req); err == nil {
			res.Body.Close()
			t.Errorf("GET /metrics after http.ErrAbortHandler = %d, want the connection aborted", res.StatusCode)
		}
		ts.must(t, http.StatusOK, "GET", "/healthz", "")
	})
}
