package httpapi_test

import (
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// errorCase is one row of an error matrix: a request and the problem it
// must be answered with.
type errorCase struct {
	name   string
	method string
	path   string
	body   string
	header []string // name, value pairs
	status int
	code   string
	// field, when set, must be a member of the problem's errors; when
	// fieldHas is set too, the member must contain it.
	field    string
	fieldHas string
}

// runErrorCases sends every case and checks the problem it gets back.
func runErrorCases(t *testing.T, ts *testServer, cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := ts.do(t, tc.method, tc.path, tc.body, tc.header...)
			p := wantProblem(t, res, tc.status, tc.code)
			if tc.field == "" {
				return
			}
			problems := problemFields(t, p)
			got, ok := problems[tc.field]
			if !ok {
				t.Fatalf("errors = %v, want a member %q", problems, tc.field)
			}
			if !strings.Contains(got, tc.fieldHas) {
				t.Errorf("errors[%q] = %q, want it to contain %q", tc.field, got, tc.fieldHas)
			}
		})
	}
}

// goInternals are fragments that must never reach a client: Go type and
// package names, encoding/json's own wording, stack traces.
var goInternals = []string{
	"json:", "Go value", "Go struct", "struct {", "reflect", "map[", "interface {", "[]uint8",
	"*http.", "httpapi.", "kernel.", "errdefs", "session.", "goroutine", "panic", ".go:",
	"Request", "RawMessage",
}

// wantProblem checks that res is an RFC 9457 problem with the given status
// and code, carrying a request id and nothing of Go's internals, and
// returns its body.
func wantProblem(t *testing.T, res response, status int, code string) map[string]any {
	t.Helper()
	if res.status != status {
		t.Fatalf("status = %d %s, want %d", res.status, res.body, status)
	}
	if mt, _, err := mime.ParseMediaType(res.header.Get("Content-Type")); err != nil || mt != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", res.header.Get("Content-Type"))
	}
	p := res.json(t)
	if p["code"] != code {
		t.Errorf("code = %v, want %s (body %s)", p["code"], code, res.body)
	}
	if p["status"] != float64(status) {
		t.Errorf("status member = %v, want %d", p["status"], status)
	}
	if p["title"] != http.StatusText(status) {
		t.Errorf("title = %v, want %q", p["title"], http.StatusText(status))
	}
	if typ, _ := p["type"].(string); typ == "" {
		t.Errorf("type = %v, want a non-empty URI", p["type"])
	} else if _, err := url.Parse(typ); err != nil {
		t.Errorf("type = %q is not a URI: %v", typ, err)
	}
	detail, _ := p["detail"].(string)
	if detail == "" {
		t.Errorf("detail = %v, want a non-empty string", p["detail"])
	}
	if id, _ := p["request_id"].(string); id == "" {
		t.Errorf("request_id = %v, want the request's id (body %s)", p["request_id"], res.body)
	}
	texts := []string{detail}
	for _, v := range problemFields(t, p) {
		texts = append(texts, v)
	}
	for _, s := range texts {
		for _, bad := range goInternals {
			if strings.Contains(s, bad) {
				t.Errorf("problem text %q contains %q, a Go internal", s, bad)
			}
		}
	}
	return p
}

// problemFields returns the problem's per-field errors.
func problemFields(t *testing.T, p map[string]any) map[string]string {
	t.Helper()
	raw, ok := p["errors"]
	if !ok {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		t.Fatalf("errors = %v, want an object", raw)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("errors[%q] = %v, want a string", k, v)
		}
		out[k] = s
	}
	return out
}

// pollUntil polls cond until it holds, failing the test after a while.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRunning polls until the run has emitted output beyond its echoed
// input, so a cancel lands mid-answer.
func waitRunning(t *testing.T, ts *testServer, id string) {
	t.Helper()
	pollUntil(t, "the run to stream its answer", func() bool {
		s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
		return s["last_seq"].(float64) > 6
	})
}

// listIDs returns the ids of a list page's data.
func listIDs(t *testing.T, page map[string]any) []string {
	t.Helper()
	data, ok := page["data"].([]any)
	if !ok {
		t.Fatalf("data = %v, want an array", page["data"])
	}
	ids := make([]string, len(data))
	for i, d := range data {
		ids[i] = d.(map[string]any)["id"].(string)
	}
	return ids
}

// walkPages follows next_cursor from path with the given limit and
// returns every id seen, in order, and the number of pages.
func walkPages(t *testing.T, ts *testServer, path string, limit int, header ...string) ([]string, int) {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var ids []string
	cursor, pages := "", 0
	for {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		page := ts.must(t, http.StatusOK, "GET", path+sep+q.Encode(), "", header...)
		pages++
		got := listIDs(t, page)
		if len(got) > limit {
			t.Fatalf("page %d has %d items, want at most %d", pages, len(got), limit)
		}
		ids = append(ids, got...)
		next, _ := page["next_cursor"].(string)
		if next == "" {
			if page["next_cursor"] != nil {
				t.Fatalf("next_cursor = %v, want a string or null", page["next_cursor"])
			}
			return ids, pages
		}
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
		cursor = next
	}
}

// eventRecorder is a kernel observer that keeps every event, for checks
// on sessions whose log is gone (deleted ones).
type eventRecorder struct {
	mu     sync.Mutex
	events []session.Event
}

// ObserveEvents implements kernel.Observer.
func (r *eventRecorder) ObserveEvents(evs []session.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		ev.Data = slices.Clone(ev.Data)
		ev.Meta = slices.Clone(ev.Meta)
		r.events = append(r.events, ev)
	}
}

// ObserveSessionEnded implements kernel.Observer.
func (r *eventRecorder) ObserveSessionEnded(string, int64) {}

// runEvents returns the recorded events of one run.
func (r *eventRecorder) runEvents(runID string) []session.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []session.Event
	for _, ev := range r.events {
		if ev.RunID == runID {
			out = append(out, ev)
		}
	}
	return out
}

// isRFC3339UTC reports whether v is an RFC 3339 timestamp in UTC.
func isRFC3339UTC(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && strings.HasSuffix(s, "Z") && ts.Location() == time.UTC
}
