package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/api"
	"github.com/kerneld/kerneld/internal/httpapi"
)

func TestHealth_Healthz(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{Version: "v1.2.3"}})
	res := ts.do(t, "GET", "/healthz", "")
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /healthz = %d %q %s, want 200 application/json", res.status, res.header.Get("Content-Type"), res.body)
	}
	if got := compactJSON(t, res.body); got != `{"status":"ok","version":"v1.2.3"}` {
		t.Errorf("body = %s, want status ok and the version", got)
	}
	ready := ts.must(t, http.StatusOK, "GET", "/readyz", "")
	if ready["status"] != "ready" {
		t.Errorf("GET /readyz = %v, want status ready", ready)
	}
}

// fakeMetrics stands for the Prometheus handler.
var fakeMetrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = io.WriteString(w, "kerneld_up 1\n")
})

func TestHealth_Metrics(t *testing.T) {
	t.Run("Enabled", func(t *testing.T) {
		ts := newServer(t, serverOptions{api: httpapi.Options{Metrics: fakeMetrics}})
		res := ts.do(t, "GET", "/metrics", "")
		if res.status != http.StatusOK || string(res.body) != "kerneld_up 1\n" ||
			!strings.HasPrefix(res.header.Get("Content-Type"), "text/plain") {
			t.Errorf("GET /metrics = %d %q %q, want the handler's output", res.status, res.header.Get("Content-Type"), res.body)
		}
	})
	t.Run("Disabled", func(t *testing.T) {
		ts := newServer(t, serverOptions{})
		wantProblem(t, ts.do(t, "GET", "/metrics", ""), http.StatusNotFound, "metrics_disabled")
	})
}

func TestHealth_OpenAPI(t *testing.T) {
	t.Run("Embedded", func(t *testing.T) {
		ts := newServer(t, serverOptions{})
		res := ts.do(t, "GET", "/openapi.yaml", "")
		if res.status != http.StatusOK {
			t.Fatalf("GET /openapi.yaml = %d %s, want 200", res.status, res.body)
		}
		if ct := res.header.Get("Content-Type"); !strings.Contains(ct, "yaml") {
			t.Errorf("Content-Type = %q, want a YAML type", ct)
		}
		if string(res.body) != string(api.OpenAPI) || !strings.HasPrefix(string(res.body), "openapi: 3.1") {
			t.Errorf("body (%d bytes) is not the embedded OpenAPI 3.1 document (%d bytes)", len(res.body), len(api.OpenAPI))
		}
	})
	t.Run("Configured", func(t *testing.T) {
		doc := "openapi: 3.1.0\ninfo: {title: test, version: '1'}\npaths: {}\n"
		ts := newServer(t, serverOptions{api: httpapi.Options{OpenAPI: []byte(doc)}})
		if res := ts.do(t, "GET", "/openapi.yaml", ""); res.status != http.StatusOK || string(res.body) != doc {
			t.Errorf("GET /openapi.yaml = %d %q, want the configured document", res.status, res.body)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		ts := newServer(t, serverOptions{api: httpapi.Options{OpenAPI: []byte{}}})
		wantProblem(t, ts.do(t, "GET", "/openapi.yaml", ""), http.StatusNotFound, "openapi_unavailable")
	})
}

func TestRouting(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	runErrorCases(t, ts, []errorCase{
		{name: "UnknownRoot", method: "GET", path: "/nope", status: 404, code: "route_not_found"},
		{name: "UnknownSubresource", method: "GET", path: "/sessions/" + id + "/nope", status: 404, code: "route_not_found"},
		{name: "VersionPrefix", method: "GET", path: "/v1/sessions", status: 404, code: "route_not_found"},
		{name: "TooDeep", method: "GET", path: "/sessions/" + id + "/runs/x/y/z", status: 404, code: "route_not_found"},
		{name: "PutSessions", method: "PUT", path: "/sessions", body: `{}`, status: 405, code: "method_not_allowed"},
		{name: "DeleteAgents", method: "DELETE", path: "/agents", status: 405, code: "method_not_allowed"},
		{name: "PostSession", method: "POST", path: "/sessions/" + id, body: `{}`, status: 405, code: "method_not_allowed"},
		{name: "GetRun", method: "GET", path: "/sessions/" + id + "/run", status: 405, code: "method_not_allowed"},
		{name: "GetCancel", method: "GET", path: "/sessions/" + id + "/runs/x/cancel", status: 405, code: "method_not_allowed"},
		{name: "PostHealthz", method: "POST", path: "/healthz", status: 405, code: "method_not_allowed"},
		{name: "HealthzMalformedQuery", method: "GET", path: "/healthz?%zz", status: 400, code: "invalid_request", field: "query"},
		{name: "PostMemoryList", method: "POST", path: "/sessions/" + id + "/memory", status: 405, code: "method_not_allowed"},
	})

	t.Run("AllowHeader", func(t *testing.T) {
		// RFC 9110 §15.5.6: a 405 response must list the allowed methods.
		for path, want := range map[string][]string{
			"/sessions":                 {"GET", "POST"},
			"/sessions/" + id:           {"DELETE", "GET", "PATCH"},
			"/sessions/" + id + "/run":  {"POST"},
			"/sessions/" + id + "/runs": {"GET"},
		} {
			res := ts.do(t, "PUT", path, "")
			var got []string
			for _, v := range res.header.Values("Allow") {
				for m := range strings.SplitSeq(v, ",") {
					got = append(got, strings.TrimSpace(m))
				}
			}
			slices.Sort(got)
			if res.status != http.StatusMethodNotAllowed || !slices.Equal(got, want) {
				t.Errorf("PUT %s = %d, Allow %v, want 405 with Allow %v", path, res.status, got, want)
			}
		}
	})
}

func TestAuth(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}}})
	k1 := []string{"Authorization", "Bearer k1"}
	k2 := []string{"Authorization", "Bearer k2"}

	created := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, k1...)
	id := created["id"].(string)
	if created["tenant"] != "acme" {
		t.Errorf("tenant = %v, want acme", created["tenant"])
	}
	runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`, k1...)["id"].(string)
	ts.waitRunAs(t, id, runID, k1)
	ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/memory/k", `{"value":1}`, k1...)

	routes := []struct{ method, path, body string }{
		{"GET", "/readyz", ""},
		{"GET", "/metrics", ""},
		{"GET", "/openapi.yaml", ""},
		{"GET", "/agents", ""},
		{"GET", "/agents/echo", ""},
		{"POST", "/sessions", `{"agent":"echo"}`},
		{"GET", "/sessions", ""},
		{"GET", "/sessions/" + id, ""},
		{"PATCH", "/sessions/" + id, `{"name":"x"}`},
		{"DELETE", "/sessions/" + id, ""},
		{"GET", "/sessions/" + id + "/children", ""},
		{"POST", "/sessions/" + id + "/run", `{"input":"hi"}`},
		{"GET", "/sessions/" + id + "/runs", ""},
		{"GET", "/sessions/" + id + "/runs/" + runID, ""},
		{"POST", "/sessions/" + id + "/runs/" + runID + "/cancel", ""},
		{"GET", "/sessions/" + id + "/events", ""},
		{"GET", "/sessions/" + id + "/messages", ""},
		{"GET", "/sessions/" + id + "/memory", ""},
		{"GET", "/sessions/" + id + "/memory/k", ""},
		{"PUT", "/sessions/" + id + "/memory/k", `{"value":2}`},
		{"DELETE", "/sessions/" + id + "/memory/k", ""},
	}
	badCredentials := map[string][]string{
		"NoHeader":    nil,
		"WrongKey":    {"Authorization", "Bearer k3"},
		"EmptyToken":  {"Authorization", "Bearer "},
		"NoScheme":    {"Authorization", "k1"},
		"BasicScheme": {"Authorization", "Basic azE6"},
		"KeyPrefix":   {"Authorization", "Bearer k"},
		"KeyExtended": {"Authorization", "Bearer k1k1"},
	}
	for name, header := range badCredentials {
		t.Run("Err"+name, func(t *testing.T) {
			for _, r := range routes {
				res := ts.do(t, r.method, r.path, r.body, header...)
				wantProblem(t, res, http.StatusUnauthorized, "unauthorized")
				if !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s %s: WWW-Authenticate = %q, want a Bearer challenge", r.method, r.path, res.header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	// Nothing the rejected requests asked for happened.
	if s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "", k1...); s["name"] != nil {
		t.Errorf("name = %v after unauthorized PATCH, want unchanged", s["name"])
	}

	t.Run("HealthzOpen", func(t *testing.T) {
		ts.must(t, http.StatusOK, "GET", "/healthz", "")
	})

	t.Run("SchemeCaseInsensitive", func(t *testing.T) {
		// RFC 9110 §11.1: the authentication scheme is case-insensitive.
		ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "", "Authorization", "bearer k1")
	})

	t.Run("TenantIsolation", func(t *testing.T) {
		if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions", "", k1...)); !slices.Equal(ids, []string{id}) {
			t.Errorf("k1 lists %v, want [%s]", ids, id)
		}
		if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions", "", k2...)); len(ids) != 0 {
			t.Errorf("k2 lists %v, want none", ids)
		}
		for _, r := range routes {
			if !strings.HasPrefix(r.path, "/sessions/") {
				continue
			}
			wantProblem(t, ts.do(t, r.method, r.path, r.body, k2...), http.StatusNotFound, "session_not_found")
		}
		res := ts.do(t, "POST", "/sessions", `{"agent":"echo","parent_id":"`+id+`"}`, k2...)
		wantProblem(t, res, http.StatusNotFound, "parent_not_found")

		other := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, k2...)
		if other["tenant"] != "other" {
			t.Errorf("k2's session tenant = %v, want other", other["tenant"])
		}
		wantProblem(t, ts.do(t, "GET", "/sessions/"+other["id"].(string), "", k1...), http.StatusNotFound, "session_not_found")
		if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions", "", k1...)); !slices.Equal(ids, []string{id}) {
			t.Errorf("k1 lists %v, want only its own [%s]", ids, id)
		}

		// k1's session survived everything k2 tried.
		s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "", k1...)
		if s["tenant"] != "acme" || s["name"] != nil {
			t.Errorf("k1's session = %v, want tenant acme and untouched", s)
		}
		ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/memory/k", "", k1...)
	})
}

// waitRunAs polls, with credentials, until the run has ended.
func (ts *testServer) waitRunAs(t *testing.T, id, runID string, header []string) {
	t.Helper()
	pollUntil(t, "run "+runID+" to end", func() bool {
		return ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, "", header...)["ended_at"] != nil
	})
}

// TestAuth_BeforeRouting: with API keys set, a request without a valid key
// learns nothing of the routes: unknown paths and wrong methods answer 401
// like real ones. With a key they answer 404 and 405.
func TestAuth_BeforeRouting(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{APIKeys: map[string]string{"k1": "acme"}}})
	k1 := []string{"Authorization", "Bearer k1"}
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, k1...)["id"].(string)
	cases := []struct {
		method, path string
		withKey      int
		code         string
	}{
		{"GET", "/nope", 404, "route_not_found"},
		{"GET", "/v1/sessions", 404, "route_not_found"},
		{"GET", "/sessions/" + id + "/nope", 404, "route_not_found"},
		{"GET", "/.env", 404, "route_not_found"},
		{"PUT", "/sessions", 405, "method_not_allowed"},
		{"DELETE", "/agents", 405, "method_not_allowed"},
		{"GET", "/sessions/" + id + "/run", 405, "method_not_allowed"},
		{"POST", "/metrics", 405, "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.method+c.path, func(t *testing.T) {
			for name, header := range map[string][]string{"NoKey": nil, "WrongKey": {"Authorization", "Bearer k2"}} {
				res := ts.do(t, c.method, c.path, "", header...)
				wantProblem(t, res, http.StatusUnauthorized, "unauthorized")
				if res.header.Get("Allow") != "" || !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s: Allow %q, WWW-Authenticate %q; want no Allow and a Bearer challenge",
						name, res.header.Get("Allow"), res.header.Get("WWW-Authenticate"))
				}
			}
			wantProblem(t, ts.do(t, c.method, c.path, "", k1...), c.withKey, c.code)
		})
	}
	t.Run("HealthzOnly", func(t *testing.T) {
		ts.must(t, http.StatusOK, "GET", "/healthz", "")
		wantProblem(t, ts.do(t, "GET", "/healthz/x", ""), http.StatusUnauthorized, "unauthorized")
		wantProblem(t, ts.do(t, "GET", "/healthzz", ""), http.StatusUnauthorized, "unauthorized")
	})
}

// TestAuth_Metrics: /metrics counts every tenant's activity, so only an
// operator key reads it once any key is configured; an operator key acts
// as no tenant.
func TestAuth_Metrics(t *testing.T) {
	tenant := []string{"Authorization", "Bearer k1"}
	admin := []string{"Authorization", "Bearer ops"}
	type check struct {
		method, path string
		header       []string
		status       int
		code         string // for a problem
	}
	tests := []struct {
		name   string
		opts   httpapi.Options
		checks []check
	}{
		{"TenantAndOperatorKeys", httpapi.Options{APIKeys: map[string]string{"k1": "acme"}, AdminKeys: []string{"ops"}}, []check{
			{"GET", "/metrics", nil, 401, "unauthorized"},
			{"GET", "/metrics", tenant, 403, "operator_key_required"},
			{"GET", "/metrics", admin, 200, ""},
			{"GET", "/sessions", admin, 403, "tenant_key_required"},
			{"POST", "/sessions", admin, 403, "tenant_key_required"},
			{"GET", "/agents", admin, 403, "tenant_key_required"},
			{"GET", "/sessions/x/events", admin, 403, "tenant_key_required"},
			{"GET", "/readyz", admin, 200, ""},
			{"GET", "/nope", admin, 404, "route_not_found"},
			{"GET", "/sessions", tenant, 200, ""},
		}},
		{"TenantKeysOnly", httpapi.Options{APIKeys: map[string]string{"k1": "acme"}}, []check{
			{"GET", "/metrics", tenant, 403, "operator_key_required"},
			{"GET", "/metrics", admin, 401, "unauthorized"},
		}},
		{"OperatorKeysOnly", httpapi.Options{AdminKeys: []string{"ops"}}, []check{
			{"GET", "/metrics", nil, 401, "unauthorized"},
			{"GET", "/metrics", tenant, 401, "unauthorized"},
			{"GET", "/metrics", admin, 200, ""},
			{"GET", "/sessions", nil, 200, ""},
		}},
		{"NoKeys", httpapi.Options{}, []check{
			{"GET", "/metrics", nil, 200, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Metrics = fakeMetrics
			ts := newServer(t, serverOptions{api: tt.opts})
			for _, c := range tt.checks {
				res := ts.do(t, c.method, c.path, "", c.header...)
				if c.code != "" {
					wantProblem(t, res, c.status, c.code)
				} else if res.status != c.status {
					t.Errorf("%s %s %v = %d %s, want %d", c.method, c.path, c.header, res.status, res.body, c.status)
				}
			}
		})
	}
}

// TestMetricsHandler: the listener of its own serves /metrics alone, to
// operator keys when they are configured, never to a tenant's key.
func TestMetricsHandler(t *testing.T) {
	get := func(t *testing.T, url string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	t.Run("Open", func(t *testing.T) {
		ts := httptest.NewServer(withSpecValidation(t, httpapi.MetricsHandler(httpapi.Options{Metrics: fakeMetrics})))
		defer ts.Close()
		if status, body := get(t, ts.URL+"/metrics"); status != 200 || body != "kerneld_up 1\n" {
			t.Errorf("GET /metrics = %d %q, want the metrics", status, body)
		}
		// Not through the spec check: the API's /sessions has no 404.
		raw := httptest.NewServer(httpapi.MetricsHandler(httpapi.Options{Metrics: fakeMetrics}))
		defer raw.Close()
		if status, body := get(t, raw.URL+"/sessions"); status != http.StatusNotFound || !strings.Contains(body, "route_not_found") {
			t.Errorf("GET /sessions = %d %s, want 404 route_not_found: the listener serves metrics alone", status, body)
		}
	})
	t.Run("OperatorKeys", func(t *testing.T) {
		h := httpapi.MetricsHandler(httpapi.Options{Metrics: fakeMetrics, AdminKeys: []string{"ops"},
			APIKeys: map[string]string{"k1": "acme"}})
		ts := httptest.NewServer(withSpecValidation(t, h))
		defer ts.Close()
		for _, c := range []struct {
			header []string
			want   int
		}{{nil, 401}, {[]string{"Authorization", "Bearer k1"}, 401}, {[]string{"Authorization", "Bearer ops"}, 200}} {
			if status, body := get(t, ts.URL+"/metrics", c.header...); status != c.want {
				t.Errorf("GET /metrics %v = %d %s, want %d", c.header, status, body, c.want)
			}
		}
	})
}
