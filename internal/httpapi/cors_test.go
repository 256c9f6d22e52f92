package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/httpapi"
)

const (
	allowedOrigin = "http://localhost:5173"
	otherOrigin   = "https://evil.example"
)

// corsServer is a server with API keys and CORS for allowedOrigin, plus
// whatever origins adds.
func corsServer(t *testing.T, origins ...string) *testServer {
	t.Helper()
	return newServer(t, serverOptions{api: httpapi.Options{
		APIKeys: map[string]string{"k1": "acme"}, CORSOrigins: append([]string{allowedOrigin}, origins...),
	}})
}

// preflight sends the OPTIONS a browser sends before a cross-origin
// request with an Authorization header.
func (ts *testServer) preflight(t *testing.T, origin, method, path string) response {
	t.Helper()
	return ts.do(t, http.MethodOptions, path, "", "Origin", origin,
		"Access-Control-Request-Method", method, "Access-Control-Request-Headers", "authorization,last-event-id")
}

// varies reports whether the response's Vary names header.
func varies(res response, header string) bool {
	for _, v := range res.header.Values("Vary") {
		for _, h := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(h), header) {
				return true
			}
		}
	}
	return false
}

// listed reports whether the comma-separated header value lists name.
func listed(value, name string) bool {
	return slices.ContainsFunc(strings.Split(value, ","), func(v string) bool {
		return strings.EqualFold(strings.TrimSpace(v), name)
	})
}

// TestCORS_Preflight: a preflight from a listed origin is answered before
// authentication, with what the browser asked to send; one from another
// origin is refused without any CORS header.
func TestCORS_Preflight(t *testing.T) {
	ts := corsServer(t)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/sessions/some-id/events"},
		{"POST", "/sessions"},
		{"DELETE", "/sessions/some-id"},
		{"PUT", "/sessions/some-id/memory/a/b"},
	} {
		res := ts.preflight(t, allowedOrigin, tc.method, tc.path)
		if res.status != http.StatusNoContent {
			t.Fatalf("preflight %s %s = %d %s, want 204", tc.method, tc.path, res.status, res.body)
		}
		h := res.header
		if got := h.Get("Access-Control-Allow-Origin"); got != allowedOrigin {
			t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, allowedOrigin)
		}
		if got := h.Get("Access-Control-Allow-Credentials"); got != "true" {
			t.Errorf("Access-Control-Allow-Credentials = %q, want true for a listed origin", got)
		}
		if !listed(h.Get("Access-Control-Allow-Methods"), tc.method) {
			t.Errorf("Access-Control-Allow-Methods = %q, want it to list %s", h.Get("Access-Control-Allow-Methods"), tc.method)
		}
		for _, name := range []string{"Authorization", "Last-Event-ID", "Content-Type", "Idempotency-Key"} {
			if !listed(h.Get("Access-Control-Allow-Headers"), name) {
				t.Errorf("Access-Control-Allow-Headers = %q, want it to list %s", h.Get("Access-Control-Allow-Headers"), name)
			}
		}
		if h.Get("Access-Control-Max-Age") == "" || !varies(res, "Origin") {
			t.Errorf("preflight headers %v: want Access-Control-Max-Age and Vary: Origin", h)
		}
	}

	res := ts.preflight(t, otherOrigin, "GET", "/sessions")
	wantProblem(t, res, http.StatusForbidden, "origin_not_allowed")
	if got := res.header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("refused preflight carries Access-Control-Allow-Origin %q", got)
	}
	if !varies(res, "Origin") {
		t.Error("refused preflight lacks Vary: Origin")
	}
}

// TestCORS_Credentials: a listed origin is echoed with credentials; "*"
// lets any other origin read, never with credentials.
func TestCORS_Credentials(t *testing.T) {
	ts := corsServer(t, "*")
	res := ts.preflight(t, otherOrigin, "POST", "/sessions")
	if res.status != http.StatusNoContent {
		t.Fatalf("preflight with * = %d %s, want 204", res.status, res.body)
	}
	if got := res.header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("Access-Control-Allow-Origin = %q, want *", got)
	}
	if got := res.header.Get("Access-Control-Allow-Credentials"); got != "" {
		t.Errorf("Access-Control-Allow-Credentials = %q with *, want none", got)
	}
	res = ts.do(t, "GET", "/agents", "", "Origin", allowedOrigin, "Authorization", "Bearer k1")
	if res.header.Get("Access-Control-Allow-Origin") != allowedOrigin || res.header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("listed origin beside *: headers %v, want it echoed with credentials", res.header)
	}
}

// TestCORS_EventSource opens a stream as a page's EventSource does from
// another origin: a GET with Origin, a key, and Last-Event-ID on
// reconnection. The page may read the answer and the headers it needs.
func TestCORS_EventSource(t *testing.T) {
	ts := corsServer(t)
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, "Authorization", "Bearer k1")["id"].(string)
	ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`, "Authorization", "Bearer k1")
	s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "",
		"Origin", allowedOrigin, "Authorization", "Bearer k1", "Last-Event-ID", "1")
	h := s.res.Header
	if h.Get("Access-Control-Allow-Origin") != allowedOrigin || h.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("stream headers %v: want the origin echoed with credentials", h)
	}
	for _, name := range []string{"Retry-After", "Location", "RateLimit-Remaining"} {
		if !listed(h.Get("Access-Control-Expose-Headers"), name) {
			t.Errorf("Access-Control-Expose-Headers = %q, want it to list %s", h.Get("Access-Control-Expose-Headers"), name)
		}
	}
	if frames := s.events(t, runEnded); frames[0].id != 2 {
		t.Errorf("stream resumed at id %d, want 2", frames[0].id)
	}

	// Another origin is served (a browser then hides the answer from
	// its page) but told nothing that would let its page read it.
	res := ts.do(t, "GET", "/sessions/"+id, "", "Origin", otherOrigin, "Authorization", "Bearer k1")
	if res.status != http.StatusOK || res.header.Get("Access-Control-Allow-Origin") != "" || !varies(res, "Origin") {
		t.Errorf("GET from another origin = %d, headers %v: want 200, no Allow-Origin, Vary: Origin", res.status, res.header)
	}
	// Without the key, a listed origin's page can read the 401's problem.
	res = ts.do(t, "GET", "/sessions/"+id, "", "Origin", allowedOrigin)
	wantProblem(t, res, http.StatusUnauthorized, "unauthorized")
	if res.header.Get("Access-Control-Allow-Origin") != allowedOrigin {
		t.Errorf("401 to a listed origin lacks Access-Control-Allow-Origin: %v", res.header)
	}
}

// TestCORS_Off: without configured origins no request gets a CORS header,
// and a preflight, with or without API keys, is refused with a problem
// that says which setting would allow the origin, rather than a bare 405
// or a 401 the browser could do nothing about.
func TestCORS_Off(t *testing.T) {
	for name, opts := range map[string]httpapi.Options{
		"WithoutKeys": {},
		"WithKeys":    {APIKeys: map[string]string{"k1": "acme"}},
	} {
		t.Run(name, func(t *testing.T) {
			ts := newServer(t, serverOptions{api: opts})
			res := ts.preflight(t, allowedOrigin, "POST", "/sessions")
			p := wantProblem(t, res, http.StatusForbidden, "origin_not_allowed")
			detail, _ := p["detail"].(string)
			for _, want := range []string{allowedOrigin, "http.cors_origins", "KERNELD_CORS_ORIGINS"} {
				if !strings.Contains(detail, want) {
					t.Errorf("preflight refused with %q, want it to name %s", detail, want)
				}
			}
			res = ts.do(t, "GET", "/agents", "", "Origin", allowedOrigin, "Authorization", "Bearer k1")
			for name := range res.header {
				if strings.HasPrefix(name, "Access-Control-") {
					t.Errorf("CORS off, yet the answer carries %s", name)
				}
			}
		})
	}
}

// TestValidateCORSOrigins accepts origins as browsers send them, and "*".
func TestValidateCORSOrigins(t *testing.T) {
	for _, ok := range []string{"*", "http://localhost:5173", "https://app.example.com", "http://[::1]:8080"} {
		if err := httpapi.ValidateCORSOrigins([]string{ok}); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"localhost:5173", "https://app.example.com/", "ftp://x", "https://", "https://a.example/path"} {
		if err := httpapi.ValidateCORSOrigins([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
