package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// bodyRoute is a route that decodes a JSON body. {id} stands for an echo
// session, {run} for one of its runs.
type bodyRoute struct{ method, path string }

var bodyRoutes = []bodyRoute{
	{"POST", "/sessions"},
	{"PATCH", "/sessions/{id}"},
	{"POST", "/sessions/{id}/run"},
	{"PUT", "/sessions/{id}/memory/k"},
	{"POST", "/sessions/{id}/runs/{run}/approvals/call-1"},
}

// FuzzRequestBodies sends arbitrary bodies and query strings to every route
// that decodes a body. Whatever arrives, kerneld must answer with a 2xx, or
// with a 4xx problem+json that names its code, and every answer must match
// api/openapi.yaml (the test server checks); never a 5xx, a panic or a
// dropped connection. `make test` runs the seeds; fuzz with
//
//	go test -run '^$' -fuzz FuzzRequestBodies -fuzztime 2m ./internal/httpapi/
func FuzzRequestBodies(f *testing.F) {
	seeds := []string{
		`{}`, `null`, `[]`, `"x"`, `1e400`, "\xff\xfe", `{"a":`, `{} {}`,
		`{"agent":"echo"}`, `{"agent":"echo","ttl":"-1h"}`, `{"agent":"echo","ttl":"99999999h"}`,
		`{"agent":"echo","parent_id":"nope","inherit":{"memory":"copy"}}`,
		`{"agent":"echo","metadata":{"k":"v"},"memory":{"k":{"deep":[1,2,{"x":null}]}}}`,
		`{"name":"n","metadata":{"":""}}`, `{"name":null}`,
		`{"input":"hi"}`, `{"input":"hi","if_busy":"queue"}`, `{"input":"","if_busy":"steer"}`,
		`{"value":{"nested":true}}`, `{"value":null}`,
		`{"decision":"approve"}`, `{"decision":"deny","reason":7}`,
	}
	for i := range bodyRoutes {
		for _, s := range seeds {
			f.Add(uint8(i), s, "")
		}
		f.Add(uint8(i), `{}`, "cursor=%zz")
		f.Add(uint8(i), `{"input":"hi"}`, "if_busy=queue&if_busy=steer")
	}
	f.Fuzz(func(t *testing.T, route uint8, body, query string) {
		ts := newServer(t, serverOptions{})
		s := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`)
		id := s["id"].(string)
		run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"first"}`)
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		path := strings.NewReplacer("{id}", id, "{run}", run["id"].(string)).Replace(r.path)
		if q := rawQuery(query); q != "" {
			path += "?" + q
		}
		res := ts.do(t, r.method, path, body)
		switch {
		case res.status >= 200 && res.status < 300:
		case res.status >= 400 && res.status < 500:
			if p := res.json(t); p["code"] == nil || p["code"] == "" {
				t.Errorf("%s %s %q = %d without a code: %s", r.method, path, body, res.status, res.body)
			}
		default:
			t.Errorf("%s %s %q = %d: %s", r.method, path, body, res.status, res.body)
		}
	})
}

// rawQuery keeps the bytes of q that may stand in a request's query
// string as sent, '%' included, so malformed escapes reach the server.
func rawQuery(q string) string {
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r >= 0x7f || r == '#' {
			return -1
		}
		return r
	}, q)
}
