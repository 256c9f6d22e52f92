package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// TestConsole_Files: the console's page and files load without a key
// even when API keys are set, with their types and a policy that allows
// no other origin; the API still needs a key, and methods other than GET
// on the console's paths are refused before routing like any route.
func TestConsole_Files(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{APIKeys: map[string]string{"k1": "acme"}}})
	for path, wantType := range map[string]string{
		"/":                    "text/html; charset=utf-8",
		"/console/app.js":      "text/javascript; charset=utf-8",
		"/console/stream.js":   "text/javascript; charset=utf-8",
		"/console/style.css":   "text/css; charset=utf-8",
		"/console/index.html?": "",
	} {
		t.Run(path, func(t *testing.T) {
			res := ts.do(t, "GET", path, "")
			if wantType == "" {
				wantProblem(t, res, http.StatusNotFound, "console_file_not_found") // only at /
				return
			}
			if res.status != http.StatusOK || res.header.Get("Content-Type") != wantType {
				t.Fatalf("GET %s = %d %q, want 200 %s", path, res.status, res.header.Get("Content-Type"), wantType)
			}
			if csp := res.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
				t.Errorf("Content-Security-Policy = %q, want this origin only", csp)
			}
			etag := res.header.Get("ETag")
			if again := ts.do(t, "GET", path, "", "If-None-Match", etag); etag == "" || again.status != http.StatusNotModified {
				t.Errorf("GET %s with If-None-Match %s = %d, want 304", path, etag, again.status)
			}
		})
	}
	wantProblem(t, ts.do(t, "GET", "/console/nope.js", ""), http.StatusNotFound, "console_file_not_found")
	wantProblem(t, ts.do(t, "POST", "/", ""), http.StatusUnauthorized, "unauthorized")
	wantProblem(t, ts.do(t, "GET", "/agents", ""), http.StatusUnauthorized, "unauthorized")
	wantProblem(t, ts.do(t, "POST", "/", "", "Authorization", "Bearer k1"), http.StatusMethodNotAllowed, "method_not_allowed")
}

// TestConsole_Page: the page loads its styles and scripts from /console/
// by relative paths, so the console also works behind a path prefix.
func TestConsole_Page(t *testing.T) {
	ts := newServer(t, serverOptions{})
	page := string(ts.do(t, "GET", "/", "").body)
	for _, want := range []string{`href="console/style.css"`, `src="console/app.js"`, `type="module"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	for _, ext := range []string{"http://", "https://", "//"} {
		if strings.Contains(strings.ReplaceAll(page, "<!--", ""), `="`+ext) {
			t.Errorf("the page refers to another origin (%s)", ext)
		}
	}
}
