package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// TestStarting: while the store opens, kerneld is alive but not ready.
func TestStarting(t *testing.T) {
	ts := httptest.NewServer(httpapi.Starting("test"))
	defer ts.Close()
	srv := &testServer{Server: ts}
	if s := srv.must(t, http.StatusOK, "GET", "/healthz", ""); s["status"] != "ok" {
		t.Errorf("healthz = %v", s)
	}
	for _, path := range []string{"/readyz", "/sessions", "/agents"} {
		res := srv.do(t, "GET", path, "")
		wantProblem(t, res, http.StatusServiceUnavailable, "starting")
		if res.header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", path)
		}
	}
}
