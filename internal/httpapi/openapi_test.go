package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/kerneld/kerneld/api"
	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// specChecker checks responses against api/openapi.yaml.
type specChecker struct {
	doc    *openapi3.T
	router routers.Router
}

// loadSpec loads and validates api/openapi.yaml once per test binary.
var loadSpec = sync.OnceValues(func() (*specChecker, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("validate api/openapi.yaml: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("api/openapi.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	for _, name := range []string{"Event", "Problem"} {
		if doc.Components.Schemas[name] == nil {
			return nil, fmt.Errorf("api/openapi.yaml has no components/schemas/%s", name)
		}
	}
	doc.Servers = nil // route by path alone: test servers listen on random ports
	// The console's files are text the spec declares as strings.
	for _, ctype := range []string{"text/html", "text/css", "text/javascript", "image/svg+xml"} {
		openapi3filter.RegisterBodyDecoder(ctype, openapi3filter.PlainBodyDecoder)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route api/openapi.yaml: %w", err)
	}
	return &specChecker{doc: doc, router: router}, nil
})

func mustLoadSpec(tb testing.TB) *specChecker {
	tb.Helper()
	c, err := loadSpec()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// withSpecValidation wraps h so every response is checked against
// api/openapi.yaml; a response the document does not allow fails t.
// Requests are not checked: tests send bad ones on purpose.
func withSpecValidation(t *testing.T, h http.Handler) http.Handler {
	t.Helper()
	return validateResponses(mustLoadSpec(t), h, t.Errorf)
}

// validateResponses serves h and reports every response the spec does not
// allow through report.
func validateResponses(c *specChecker, h http.Handler, report func(format string, args ...any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &teeRecorder{w: w}
		h.ServeHTTP(rec, r)
		rec.sent()
		if err := c.check(r, rec.code, rec.header, rec.body.Bytes()); err != nil {
			report("%s %s answered %d, which api/openapi.yaml does not allow: %v", r.Method, r.URL.RequestURI(), rec.code, err)
		}
	})
}

// teeRecorder passes a response through to the client and keeps a copy.
// It flushes through, so streams keep streaming, and unwraps, so
// http.NewResponseController reaches the connection (write deadlines).
type teeRecorder struct {
	w      http.ResponseWriter
	code   int
	header http.Header // as sent with the status line
	body   bytes.Buffer
}

func (rec *teeRecorder) Header() http.Header { return rec.w.Header() }

func (rec *teeRecorder) WriteHeader(code int) {
	if rec.code == 0 && code >= 200 {
		rec.code, rec.header = code, rec.w.Header().Clone()
	}
	rec.w.WriteHeader(code)
}

func (rec *teeRecorder) Write(p []byte) (int, error) {
	rec.sent()
	rec.body.Write(p)
	return rec.w.Write(p)
}

func (rec *teeRecorder) Flush() { _ = rec.FlushError() }

// FlushError lets http.ResponseController report a failed flush.
func (rec *teeRecorder) FlushError() error {
	rec.sent()
	return http.NewResponseController(rec.w).Flush()
}

func (rec *teeRecorder) Unwrap() http.ResponseWriter { return rec.w }

// sent records the implicit 200 that net/http sends when a handler writes
// or flushes, or returns, without a status.
func (rec *teeRecorder) sent() {
	if rec.code == 0 {
		rec.code, rec.header = http.StatusOK, rec.w.Header().Clone()
	}
}

// check reports whether a response to r is one the spec allows.
func (c *specChecker) check(r *http.Request, status int, header http.Header, body []byte) error {
	if r.Method == http.MethodHead {
		return nil // no body to check
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		return nil // a CORS preflight, answered before routing: no operation of the spec
	}
	route, params, err := c.router.FindRoute(routable(r))
	if err != nil {
		// Not an operation of the spec: chi's not-found and
		// method-not-allowed handlers answer, with a problem.
		return c.checkProblem(status, header, body)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	input.Options.WithCustomSchemaErrorFunc(schemaErrorReason)
	if contentMediaType(header) != "text/event-stream" {
		input.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
			return err
		}
		if contentMediaType(header) == "application/problem+json" {
			return checkProblemMembers(status, body)
		}
		return nil
	}
	input.Options.ExcludeResponseBody = true // kin-openapi cannot decode event streams
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		return err
	}
	if route.Operation.Responses.Status(status).Value.Content.Get("text/event-stream") == nil {
		return fmt.Errorf("the spec declares no text/event-stream response for status %d", status)
	}
	if header.Get("X-Vercel-AI-UI-Message-Stream") != "" {
		return c.checkUIStream(body)
	}
	if route.Path == "/sessions/events" {
		return c.checkFeed(body)
	}
	return c.checkStream(body)
}

// checkFeed checks the session feed: every event frame's data is a
// SessionFeedSnapshot (event snapshot) or a SessionFeedEvent of its
// event's type, with its id as seq; comments and the retry line besides.
func (c *specChecker) checkFeed(body []byte) error {
	frames := strings.Split(string(body), "\n\n")
	frames = frames[:len(frames)-1] // empty, or a frame cut short
	var errs []error
	for _, f := range frames {
		if strings.HasPrefix(f, ":") || f == "retry: 2000" {
			continue
		}
		lines := strings.Split(f, "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "id: ") || !strings.HasPrefix(lines[1], "event: ") || !strings.HasPrefix(lines[2], "data: ") {
			errs = append(errs, fmt.Errorf("feed frame %q is not id, event and data", f))
			continue
		}
		event, data := strings.TrimPrefix(lines[1], "event: "), strings.TrimPrefix(lines[2], "data: ")
		schema := "SessionFeedEvent"
		if event == "snapshot" {
			schema = "SessionFeedSnapshot"
		}
		v, err := decodeValue([]byte(data))
		if err == nil {
			err = c.visit(schema, v)
		}
		if m, ok := v.(map[string]any); err == nil && ok && (m["type"] != event || fmt.Sprint(m["seq"]) != strings.TrimPrefix(lines[0], "id: ")) {
			err = fmt.Errorf("type %v, seq %v", m["type"], m["seq"])
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("feed frame %s: %w", data, err))
		}
	}
	return errors.Join(errs...)
}

// checkUIStream checks an AI SDK UI message stream: data lines of
// UIMessageChunk objects, then [DONE] last if at all; comments and the
// retry line besides.
func (c *specChecker) checkUIStream(body []byte) error {
	frames := strings.Split(string(body), "\n\n")
	frames = frames[:len(frames)-1] // empty, or a frame cut short
	var errs []error
	done := false
	for _, f := range frames {
		if strings.HasPrefix(f, ":") || f == "retry: 2000" {
			continue
		}
		data, ok := strings.CutPrefix(f, "data: ")
		switch {
		case !ok || strings.Contains(data, "\n"):
			errs = append(errs, fmt.Errorf("frame %q is not one data line", f))
		case done:
			errs = append(errs, fmt.Errorf("frame %q follows [DONE]", f))
		case data == "[DONE]":
			done = true
		default:
			v, err := decodeValue([]byte(data))
			if err == nil {
				err = c.visit("UIMessageChunk", v)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("chunk %s: %w", data, err))
			}
		}
	}
	return errors.Join(errs...)
}

// routable returns r as the router can match it: gorilla/mux gives a path
// variable one segment, and a memory key is the whole rest of the path.
func routable(r *http.Request) *http.Request {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/sessions/")
	if !ok {
		return r
	}
	id, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return r
	}
	key, ok := strings.CutPrefix(rest, "memory/")
	if !ok || !strings.Contains(key, "/") {
		return r
	}
	u := *r.URL
	u.RawPath = "/sessions/" + id + "/memory/" + strings.ReplaceAll(key, "/", "%2F")
	var err error
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return r
	}
	routed := r.WithContext(r.Context())
	routed.URL = &u
	return routed
}

// checkProblem checks a response that must be a problem.
func (c *specChecker) checkProblem(status int, header http.Header, body []byte) error {
	if mt := contentMediaType(header); mt != "application/problem+json" {
		return fmt.Errorf("content type %q, want application/problem+json", mt)
	}
	v, err := decodeValue(body)
	if err != nil {
		return fmt.Errorf("decode problem: %w", err)
	}
	if err := c.visit("Problem", v); err != nil {
		return err
	}
	return checkProblemMembers(status, body)
}

// checkProblemMembers checks what the Problem schema states in words: the
// body's status is the response's, and its type is derived from its code.
func checkProblemMembers(status int, body []byte) error {
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("decode problem: %w", err)
	}
	var errs []error
	if p.Status != status {
		errs = append(errs, fmt.Errorf("problem status = %d, want the response status %d", p.Status, status))
	}
	if want := "urn:kerneld:problem:" + p.Code; p.Type != want {
		errs = append(errs, fmt.Errorf("problem type = %q, want %q", p.Type, want))
	}
	return errors.Join(errs...)
}

// checkStream checks an SSE body: every frame's data is an Event whose type
// is the frame's event (and whose seq, if it states one, is the frame's id), in seq order with
// no gap. Frames without data may carry only retry and comment lines, or
// an id line alone (an event elided for the client, which has it).
func (c *specChecker) checkStream(body []byte) error {
	frames := strings.Split(string(body), "\n\n")
	frames = frames[:len(frames)-1] // empty, or a frame cut short
	var errs []error
	var events []frameEvent
	var prev int64 // the id of the last frame with one
	for _, f := range frames {
		fr, err := parseRawFrame(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if fr.data == "" {
			if fr.id != 0 { // an elided event: its id alone
				if prev != 0 && fr.id != prev+1 {
					errs = append(errs, fmt.Errorf("frame id %d: follows id %d", fr.id, prev))
				}
				prev = fr.id
			}
			continue
		}
		ev, err := checkEventFrame(fr, prev)
		prev = fr.id
		if err != nil {
			errs = append(errs, fmt.Errorf("frame id %d: %w", fr.id, err))
		}
		if ev.value != nil {
			events = append(events, ev)
		}
	}
	return errors.Join(append(errs, c.checkEvents(events))...)
}

// frameEvent is the data of one event frame.
type frameEvent struct {
	id    int64
	typ   string
	value any // decoded as kin-openapi decodes bodies
}

// checkEventFrame decodes one event frame that follows the frame with id
// prev (0 for the first) and checks its id, event and order.
func checkEventFrame(fr rawFrame, prev int64) (frameEvent, error) {
	v, err := decodeValue([]byte(fr.data))
	if err != nil {
		return frameEvent{}, fmt.Errorf("decode data: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return frameEvent{}, fmt.Errorf("data %s is not an object", fr.data)
	}
	var ev struct {
		Type     string `json:"type"`
		Metadata struct {
			Kerneld struct {
				Seq *int64 `json:"seq"`
			} `json:"kerneld"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal([]byte(fr.data), &ev) // the schema reports what does not fit
	var errs []error
	if ev.Type != fr.event {
		errs = append(errs, fmt.Errorf("event %q carries a %s", fr.event, ev.Type))
	}
	if seq := ev.Metadata.Kerneld.Seq; seq != nil && *seq != fr.id { // the id states it; data need not repeat it
		errs = append(errs, fmt.Errorf("carries seq %d", *seq))
	}
	// A snapshot is no event of the log: it takes the id of the event
	// before it, the id a client resumes after, and so does the run that
	// carries an idle session's snapshot (0 before the first event).
	presented := ev.Type == "MESSAGES_SNAPSHOT" || strings.Contains(fr.data, `"snapshot":true}}}`)
	snapshotAfter := presented && fr.id == prev
	if fr.id == 0 && !presented {
		errs = append(errs, errors.New("id 0 is no seq"))
	}
	// So does the interrupt outcome the AG-UI route presents a run with
	// that waits for approval.
	interruptAfter := ev.Type == "RUN_FINISHED" && fr.id == prev && strings.Contains(fr.data, `"type":"interrupt"`)
	if prev != 0 && fr.id != prev+1 && !snapshotAfter && !interruptAfter {
		errs = append(errs, fmt.Errorf("follows id %d", prev))
	}
	return frameEvent{id: fr.id, typ: ev.Type, value: v}, errors.Join(errs...)
}

// checkEvents validates events against the Event schema, each against the
// schema its type maps to. kin-openapi compiles a schema on every
// validation, so the events of one type are validated as one array; only
// when that fails is each validated alone, to name the frames at fault.
func (c *specChecker) checkEvents(events []frameEvent) error {
	byType := make(map[string][]frameEvent)
	for _, ev := range events {
		name := c.eventSchema(ev.typ)
		byType[name] = append(byType[name], ev)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(byType)) {
		evs := byType[name]
		values := make([]any, len(evs))
		for i, ev := range evs {
			values[i] = ev.value
		}
		err := visitSchema(openapi3.NewArraySchema().WithItems(c.doc.Components.Schemas[name].Value), values)
		if err == nil {
			continue
		}
		var frameErrs []error
		for _, ev := range evs {
			if err := c.visit(name, ev.value); err != nil {
				frameErrs = append(frameErrs, fmt.Errorf("frame id %d: %w", ev.id, err))
			}
		}
		if len(frameErrs) == 0 {
			frameErrs = append(frameErrs, fmt.Errorf("events do not match components/schemas/%s: %w", name, err))
		}
		errs = append(errs, frameErrs...)
	}
	return errors.Join(errs...)
}

// eventSchema names the schema an event of type typ must match: the one the
// Event discriminator maps it to, so that a failure names only what is
// wrong with it, or Event itself for a type it does not map.
func (c *specChecker) eventSchema(typ string) string {
	if d := c.doc.Components.Schemas["Event"].Value.Discriminator; d != nil {
		if ref, ok := d.Mapping[typ]; ok {
			if name, ok := strings.CutPrefix(ref.Ref, "#/components/schemas/"); ok && c.doc.Components.Schemas[name] != nil {
				return name
			}
		}
	}
	return "Event"
}

// rawFrame is one frame of an event stream as kerneld writes it.
type rawFrame struct {
	id    int64
	event string
	data  string
}

// parseRawFrame parses one frame (without its blank line). An event frame
// has exactly one id, event and data line; any other frame only retry and
// comment lines.
func parseRawFrame(f string) (rawFrame, error) {
	var fr rawFrame
	fields := map[string]int{}
	for line := range strings.SplitSeq(f, "\n") {
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			return fr, fmt.Errorf("frame %q: line %q is not a field", f, line)
		}
		fields[name]++
		switch name {
		case "retry":
			if _, err := strconv.Atoi(value); err != nil {
				return fr, fmt.Errorf("frame %q: retry is not a number", f)
			}
		case "id":
			id, err := strconv.ParseInt(value, 10, 64)
			if err != nil || id < 0 {
				return fr, fmt.Errorf("frame %q: id is not a seq", f)
			}
			fr.id = id
		case "event":
			fr.event = value
		case "data":
			fr.data = value
		default:
			return fr, fmt.Errorf("frame %q: unexpected field %q", f, name)
		}
	}
	elided := fields["id"] == 1 && fields["event"]+fields["data"]+fields["retry"] == 0 // an AG-UI client's own message content
	if fields["id"]+fields["event"]+fields["data"] > 0 && !elided &&
		(fields["id"] != 1 || fields["event"] != 1 || fields["data"] != 1 || fields["retry"] != 0) {
		return fr, fmt.Errorf("frame %q: want one id, event and data line", f)
	}
	return fr, nil
}

// visit validates a decoded JSON value against a component schema.
func (c *specChecker) visit(name string, v any) error {
	if err := visitSchema(c.doc.Components.Schemas[name].Value, v); err != nil {
		return fmt.Errorf("does not match components/schemas/%s: %w", name, err)
	}
	return nil
}

// visitSchema validates a decoded JSON value against an OpenAPI 3.1 schema.
func visitSchema(schema *openapi3.Schema, v any) error {
	return schema.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse(), openapi3.MultiErrors(),
		openapi3.SetSchemaErrorMessageCustomizer(schemaErrorReason))
}

// schemaErrorReason leaves the schema, which can run to pages, out of a
// schema error's message.
func schemaErrorReason(err *openapi3.SchemaError) string {
	if p := err.JSONPointer(); len(p) > 0 {
		return fmt.Sprintf("at %q: %s", "/"+strings.Join(p, "/"), err.Reason)
	}
	return err.Reason
}

// decodeValue decodes b as kin-openapi decodes bodies.
func decodeValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// contentMediaType returns the media type of a Content-Type header, lowercased.
func contentMediaType(header http.Header) string {
	mt, _, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil {
		return header.Get("Content-Type")
	}
	return mt
}

func TestRoutesMatchOpenAPI(t *testing.T) {
	spec := mustLoadSpec(t)
	ts := newServer(t, serverOptions{})

	var got []string
	for _, route := range ts.api.Routes() {
		// chi's catch-all is the memory key, which the spec names.
		if prefix, ok := strings.CutSuffix(route, "/*"); ok {
			route = prefix + "/{key}"
		}
		got = append(got, route)
	}
	var want []string
	for path, item := range spec.doc.Paths.Map() {
		for method := range item.Operations() {
			want = append(want, method+" "+path)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if onlyRoutes, onlySpec := missingFrom(want, got), missingFrom(got, want); len(onlyRoutes)+len(onlySpec) > 0 {
		t.Errorf("routes.go and api/openapi.yaml differ\nin routes.go, not in the spec:\n\t%s\nin the spec, not in routes.go:\n\t%s",
			strings.Join(onlyRoutes, "\n\t"), strings.Join(onlySpec, "\n\t"))
	}
}

// missingFrom returns the elements of sorted b that sorted a lacks.
func missingFrom(a, b []string) []string {
	var out []string
	for _, s := range b {
		if _, found := slices.BinarySearch(a, s); !found {
			out = append(out, s)
		}
	}
	return out
}

const (
	specSessionID = "0197a0b2-5c1e-7d3a-9f10-2b4c6d8e0a12"
	specRunID     = "0197a0b2-5c1f-7b2e-8a01-3c5d7e9f1b23"
)

// specSession is a session as the API answers it.
var specSession = map[string]any{
	"id": specSessionID, "agent": "echo", "name": "", "metadata": map[string]any{},
	"state": "active", "status": "idle", "parent_id": nil, "root_id": specSessionID, "depth": 0, "tenant": "default",
	"active_run_id": nil, "last_seq": 0, "unread": 0, "read_seq": 0, "queued_runs": 0, "instructions": nil, "ttl": nil, "expires_at": nil, "inherit": nil, "overrides": map[string]any{},
	"mcp_servers": []any{}, "permission_mode": "ask", "always_approved": []any{},
	"forked_from": nil, "closed_reason": nil,
	"created_at": "2025-06-15T15:06:40Z", "updated_at": "2025-06-15T15:06:40Z",
}

// specEventJSON returns a TEXT_MESSAGE_CONTENT event as a JSON event page
// encodes it.
func specEventJSON(seq int64, delta string) string {
	return fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":%q,"timestamp":1750000000000,`+
		`"metadata":{"kerneld":{"seq":%d,"sessionId":%q,"runId":%q}}}`,
		delta, seq, specSessionID, specRunID)
}

// specFrameJSON returns the same event as an SSE frame's data line carries
// it: without the seq, which is the frame's id.
func specFrameJSON(delta string) string {
	return fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":%q,"timestamp":1750000000000,`+
		`"metadata":{"kerneld":{"sessionId":%q,"runId":%q}}}`, delta, specSessionID, specRunID)
}

// specEventFrame returns the SSE frame of the event with seq and delta,
// named event, or TEXT_MESSAGE_CONTENT when event is "".
func specEventFrame(seq int64, delta, event string) string {
	if event == "" {
		event = "TEXT_MESSAGE_CONTENT"
	}
	return fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", seq, event, specFrameJSON(delta))
}

// withoutKey returns a copy of m without key.
func withoutKey(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSpecValidation_Reports(t *testing.T) {
	spec := mustLoadSpec(t)
	session := "/sessions/" + specSessionID
	notFound := `{"type":"urn:kerneld:problem:session_not_found","title":"Not Found","status":404,` +
		`"detail":"session not found","code":"session_not_found","instance":"/sessions/x","request_id":"r1"}`
	stream := "retry: 2000\n\n" + specEventFrame(1, "Hel", "") + ": ping\n\n" + specEventFrame(2, "lo", "")
	tests := []struct {
		name        string
		method      string
		path        string
		status      int
		contentType string
		body        string
		wantErr     string // "" when the response is valid
	}{
		{"valid session", "GET", session, 200, "application/json", mustMarshal(t, specSession), ""},
		{"session without id", "GET", session, 200, "application/json", mustMarshal(t, withoutKey(specSession, "id")), "id"},
		{"session with an unknown state", "GET", session, 200, "application/json",
			strings.Replace(mustMarshal(t, specSession), `"active"`, `"sleeping"`, 1), "state"},
		{"session with an extra field", "GET", session, 200, "application/json",
			strings.Replace(mustMarshal(t, specSession), `{`, `{"secret":"x",`, 1), "secret"},
		{"undocumented status", "GET", session, http.StatusTeapot, "application/problem+json",
			strings.ReplaceAll(notFound, "404", "418"), "status is not supported"},
		{"undocumented content type", "GET", session, 200, "text/plain", "ok", "text/plain"},
		{"valid problem", "GET", session, 404, "application/problem+json", notFound, ""},
		{"problem without code", "GET", session, 404, "application/problem+json",
			strings.Replace(notFound, `"code":"session_not_found",`, "", 1), "code"},
		{"problem with another status", "GET", session, 404, "application/problem+json",
			strings.Replace(notFound, `"status":404`, `"status":409`, 1), "want the response status 404"},
		{"valid memory entry with a slash in its key", "GET", session + "/memory/a/b", 200, "application/json",
			`{"key":"a/b","value":{"x":[1,null]},"updated_at":"2025-06-15T15:06:40Z"}`, ""},
		{"valid route_not_found", "GET", "/nope", 404, "application/problem+json",
			`{"type":"urn:kerneld:problem:route_not_found","title":"Not Found","status":404,"detail":"no route for GET /nope","code":"route_not_found"}`, ""},
		{"route_not_found as plain text", "GET", "/nope", 404, "text/plain", "404 page not found", "application/problem+json"},
		{"method_not_allowed as an empty problem", "PUT", "/agents", 405, "application/problem+json", `{}`, "Problem"},
		{"valid event stream", "GET", session + "/events", 200, "text/event-stream", stream, ""},
		{"valid event page", "GET", session + "/events", 200, "application/json",
			`{"data":[` + specEventJSON(7, "x") + `],"next_after":7}`, ""},
		{"event with an empty delta", "GET", session + "/events", 200, "text/event-stream", specEventFrame(1, "", ""), "TextMessageContentEvent"},
		{"frame event is not the data type", "GET", session + "/events", 200, "text/event-stream",
			specEventFrame(1, "x", "TEXT_MESSAGE_END"), "carries a TEXT_MESSAGE_CONTENT"},
		{"frame data repeats another seq", "GET", session + "/events", 200, "text/event-stream",
			"id: 2\nevent: TEXT_MESSAGE_CONTENT\ndata: " + specEventJSON(1, "x") + "\n\n", "carries seq 1"},
		{"event page without seqs", "GET", session + "/events", 200, "application/json",
			`{"data":[` + specFrameJSON("x") + `],"next_after":7}`, "seq"},
		{"frames out of order", "GET", session + "/events", 200, "text/event-stream",
			specEventFrame(2, "x", "") + specEventFrame(1, "y", ""), "follows id 2"},
		{"frame without an event line", "GET", session + "/events", 200, "text/event-stream",
			strings.Replace(specEventFrame(1, "x", ""), "event: TEXT_MESSAGE_CONTENT\n", "", 1), "want one id, event and data line"},
		{"event stream where the spec has none", "GET", session, 200, "text/event-stream", stream, "text/event-stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reports []string
			h := validateResponses(spec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}), func(format string, args ...any) { reports = append(reports, fmt.Sprintf(format, args...)) })
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, nil))

			switch {
			case tt.wantErr == "" && len(reports) > 0:
				t.Errorf("reports = %q, want none", reports)
			case tt.wantErr != "" && len(reports) != 1:
				t.Errorf("reports = %q, want one mentioning %q", reports, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(reports[0], tt.wantErr):
				t.Errorf("report = %q, want it to mention %q", reports[0], tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(reports[0], fmt.Sprintf("%s %s answered %d", tt.method, tt.path, tt.status)):
				t.Errorf("report = %q, want it to name the method, path and status", reports[0])
			}
		})
	}
}

// TestSpecValidation_Streams checks that validation does not get in a
// stream's way: frames reach the client as they are flushed, and write
// deadlines reach the connection.
func TestSpecValidation_Streams(t *testing.T) {
	spec := mustLoadSpec(t)
	var reports []string
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, fmt.Sprintf(format, args...))
	}
	firstRead := make(chan struct{})
	handlerErr := make(chan error, 1)
	ts := httptest.NewServer(validateResponses(spec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		err := rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err == nil {
			_, _ = io.WriteString(w, "retry: 2000\n\n"+specEventFrame(1, "a", ""))
			err = rc.Flush()
		}
		handlerErr <- err
		select {
		case <-firstRead:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, specEventFrame(2, "b", ""))
	}), report))
	defer ts.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", ts.URL+"/sessions/"+specSessionID+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := <-handlerErr; err != nil {
		t.Fatalf("SetWriteDeadline or Flush through the validator: %v", err)
	}
	r := bufio.NewReader(res.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read the first frame before the handler returned: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	close(firstRead)
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), "id: 2\n") {
		t.Errorf("rest of the stream = %q, want frame 2", rest)
	}
	ts.Close() // waits for the handler, and so for the validation
	mu.Lock()
	defer mu.Unlock()
	if len(reports) > 0 {
		t.Errorf("reports = %q, want none", reports)
	}
}

func TestServer_OpenAPI(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		ts := newServer(t, serverOptions{})
		res := ts.do(t, "GET", "/openapi.yaml", "")
		if res.status != http.StatusOK {
			t.Fatalf("GET /openapi.yaml = %d %s, want 200", res.status, res.body)
		}
		if ct := res.header.Get("Content-Type"); ct != "application/yaml" {
			t.Errorf("Content-Type = %q, want application/yaml", ct)
		}
		if !bytes.Equal(res.body, api.OpenAPI) {
			t.Errorf("body is not the embedded api/openapi.yaml (%d bytes, want %d)", len(res.body), len(api.OpenAPI))
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		ts := newServer(t, serverOptions{api: httpapi.Options{OpenAPI: []byte{}}})
		body := ts.must(t, http.StatusNotFound, "GET", "/openapi.yaml", "")
		if body["code"] != "openapi_unavailable" {
			t.Errorf("code = %v, want openapi_unavailable", body["code"])
		}
	})
}

// thinker reasons, calls a tool, then answers: every kind of event a
// successful run can log.
const thinker = `
name: thinker
description: reasons, calls a tool, then answers
model:
  provider: scripted
  script:
    - {reasoning: "The user wants the time.", text: "Checking.", tool_calls: [{name: current_time, arguments: {timezone: UTC}}]}
    - {text: "Done."}
tools: [current_time]
`

// failingDelegator asks the failing agent through spawn_agent, so that its
// run logs SUBAGENT_ERROR, then answers.
const failingDelegator = `
name: failingdelegator
description: delegates to an agent that fails
model:
  provider: scripted
  script:
    - {text: "Asking.", tool_calls: [{name: spawn_agent, arguments: {agent: failing, input: "go"}}]}
    - {text: "It failed."}
tools: [spawn_agent]
child_agents: [failing]
`

// TestEvents_MatchOpenAPI drives runs that end every way a run can end and
// reads their events as a stream and as pages, so that the spec validation
// of newServer sees every event type kerneld emits.
func TestEvents_MatchOpenAPI(t *testing.T) {
	agents := append(slices.Clone(kerneltest.DefaultAgents), thinker, failingDelegator)
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: agents}})
	seen := make(map[string]bool)

	id := ts.createSession(t, "thinker")
	s := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"what time is it?"}`, "Content-Type", "application/json")
	for _, f := range s.events(t, nil) {
		seen[f.event] = true
	}

	slow := ts.createSession(t, "slow")
	runID := ts.startRun(t, slow, "go")
	ts.must(t, http.StatusOK, "POST", "/sessions/"+slow+"/runs/"+runID+"/cancel", "")

	failing := ts.createSession(t, "failing")
	ts.waitRun(t, failing, ts.startRun(t, failing, "go"))

	// A child that answers and one that fails: SUBAGENT_STARTED, then
	// SUBAGENT_FINISHED or SUBAGENT_ERROR, in the parent's stream.
	delegator := ts.createSession(t, "delegator")
	s = ts.openStream(t, "POST", "/sessions/"+delegator+"/run", `{"input":"go"}`, "Content-Type", "application/json")
	for _, f := range s.events(t, nil) {
		seen[f.event] = true
	}
	failingDelegator := ts.createSession(t, "failingdelegator")
	ts.waitRun(t, failingDelegator, ts.startRun(t, failingDelegator, "go"))

	for _, id := range []string{id, slow, failing, delegator, failingDelegator} {
		page := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/events?limit=1000", "", "Accept", "application/json")
		for _, ev := range page["data"].([]any) {
			seen[ev.(map[string]any)["type"].(string)] = true
		}
	}
	for _, typ := range []string{
		"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
		"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
		"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
		"SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR",
	} {
		if !seen[typ] {
			t.Errorf("no %s event was checked against the spec", typ)
		}
	}
}
