package httpapi

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// metadataPrefix starts the names of the metadata filters of
// GET /sessions: metadata.KEY=VALUE.
const metadataPrefix = "metadata."

// pageParams are the query parameters every paged list takes.
var pageParams = []string{"limit", "cursor"}

// listParams are the query parameters each list route takes, by route
// pattern. A list route refuses any other (strictQuery): a filter it
// silently ignored would hand back more than was asked for, such as every
// user's sessions. A name ending in "." takes any suffix. Keep it in step
// with api/openapi.yaml; TestListParamsMatchOpenAPI checks that it is.
var listParams = map[string][]string{
	"GET /agents":                                nil,
	"GET /approvals":                             append([]string{"state", "agent"}, pageParams...),
	"GET /sessions":                              append([]string{"agent", "state", "parent_id", "forked_from", "created_after", "created_before", "q", metadataPrefix}, pageParams...),
	"GET /sessions/events":                       {"agent", "after", "snapshot", metadataPrefix},
	"GET /sessions/{id}/children":                pageParams,
	"GET /sessions/{id}/runs":                    append([]string{"state"}, pageParams...),
	"GET /sessions/{id}/runs/{run_id}/approvals": nil,
	"GET /sessions/{id}/events":                  {"after", "limit", "run_id", "snapshot"},
	"GET /sessions/{id}/messages":                pageParams,
	"GET /sessions/{id}/memory":                  nil,
	"GET /webhooks/deliveries":                   append([]string{"state"}, pageParams...),
}

// strictQuery refuses, on a list route, a query parameter the route does
// not take, naming it. It runs once the route is matched.
func (s *Server) strictQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allowed, list := listParams[r.Method+" "+chi.RouteContext(r.Context()).RoutePattern()]
		if list {
			if err := checkParams(r, allowed); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkParams returns an unknown_parameter error for the first parameter
// of r, in name order, that allowed does not list.
func checkParams(r *http.Request, allowed []string) error {
	q := r.URL.Query()
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !paramAllowed(name, allowed) {
			return errdefs.New(errdefs.ErrInvalid, errdefs.CodeUnknownParameter,
				"unknown query parameter %q; this route takes %s", name, strings.Join(paramNames(allowed), ", ")).
				With("parameter", name)
		}
	}
	return nil
}

// paramAllowed reports whether allowed lists name, or a prefix of it
// ending in ".".
func paramAllowed(name string, allowed []string) bool {
	return slices.ContainsFunc(allowed, func(a string) bool {
		if strings.HasSuffix(a, ".") {
			return len(name) > len(a) && strings.HasPrefix(name, a)
		}
		return a == name
	})
}

// paramNames lists allowed as a client reads it.
func paramNames(allowed []string) []string {
	if len(allowed) == 0 {
		return []string{"no query parameters"}
	}
	out := make([]string, len(allowed))
	for i, a := range allowed {
		out[i] = a
		if strings.HasSuffix(a, ".") {
			out[i] = a + "KEY"
		}
	}
	return out
}

// metadataFilter reads the metadata.KEY=VALUE parameters: every one must
// hold, so a key given twice with two values matches nothing and is
// refused.
func metadataFilter(r *http.Request) (map[string]string, error) {
	var out map[string]string
	for name, values := range r.URL.Query() {
		key, ok := strings.CutPrefix(name, metadataPrefix)
		if !ok {
			continue
		}
		if len(values) > 1 && slices.ContainsFunc(values, func(v string) bool { return v != values[0] }) {
			return nil, errdefs.Invalid(name, "given twice with different values: no session can hold both")
		}
		if out == nil {
			out = make(map[string]string)
		}
		out[key] = values[0]
	}
	return out, nil
}

// timeParam reads an RFC 3339 time parameter; absent is the zero time.
func timeParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errdefs.Invalid(name, "must be an RFC 3339 time such as 2025-01-31T12:00:00Z")
	}
	return t, nil
}

// sessionFilters reads the filters of GET /sessions.
func sessionFilters(r *http.Request) (kernel.ListSessions, error) {
	q := r.URL.Query()
	req := kernel.ListSessions{Agent: q.Get("agent"), State: session.State(q.Get("state")), ParentID: q.Get("parent_id"),
		ForkedFrom: q.Get("forked_from"), Search: q.Get("q")}
	var err error
	if req.Metadata, err = metadataFilter(r); err != nil {
		return req, err
	}
	if req.CreatedAfter, err = timeParam(r, "created_after"); err != nil {
		return req, err
	}
	req.CreatedBefore, err = timeParam(r, "created_before")
	return req, err
}
