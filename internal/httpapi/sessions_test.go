package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

func TestSessions_Create(t *testing.T) {
	ts := newServer(t, serverOptions{})

	t.Run("OK", func(t *testing.T) {
		res := ts.do(t, "POST", "/sessions",
			`{"agent":"echo","name":"first","metadata":{"team":"core","env":"dev"},"memory":{"greeting":"hi","prefs":{"lang":"en"}}}`)
		if res.status != http.StatusCreated {
			t.Fatalf("status = %d %s, want 201", res.status, res.body)
		}
		if ct := res.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q, want application/json", ct)
		}
		s := res.json(t)
		id, _ := s["id"].(string)
		if !session.ValidID(id) || len(id) != session.IDLen {
			t.Fatalf("id = %v, want a new kerneld id", s["id"])
		}
		if loc := res.header.Get("Location"); loc != "/sessions/"+id {
			t.Errorf("Location = %q, want /sessions/%s", loc, id)
		}
		want := map[string]any{
			"id": id, "agent": "echo", "name": "first", "state": "active",
			"metadata":  map[string]any{"team": "core", "env": "dev"},
			"parent_id": nil, "root_id": id, "depth": float64(0), "tenant": "default",
			"active_run_id": nil, "last_seq": float64(0),
		}
		for k, v := range want {
			if fmt.Sprint(s[k]) != fmt.Sprint(v) {
				t.Errorf("%s = %v, want %v", k, s[k], v)
			}
		}
		for _, k := range []string{"created_at", "updated_at"} {
			if !isRFC3339UTC(s[k]) {
				t.Errorf("%s = %v, want an RFC 3339 UTC timestamp", k, s[k])
			}
		}
		got := ts.must(t, http.StatusOK, "GET", res.header.Get("Location"), "")
		if fmt.Sprint(got) != fmt.Sprint(s) {
			t.Errorf("GET Location = %v, want %v", got, s)
		}
		mem := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/memory", "")
		data := mem["data"].([]any)
		if len(data) != 2 {
			t.Fatalf("memory = %v, want the two seeded entries", mem)
		}
		first, second := data[0].(map[string]any), data[1].(map[string]any)
		if first["key"] != "greeting" || first["value"] != "hi" {
			t.Errorf("memory[0] = %v, want greeting: hi", first)
		}
		if second["key"] != "prefs" || fmt.Sprint(second["value"]) != "map[lang:en]" {
			t.Errorf("memory[1] = %v, want prefs: {lang: en}", second)
		}
	})

	t.Run("Minimal", func(t *testing.T) {
		s := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"tooluser"}`)
		if s["name"] != nil || fmt.Sprint(s["metadata"]) != "map[]" {
			t.Errorf("name, metadata = %v, %v, want null and {}", s["name"], s["metadata"])
		}
	})

	t.Run("TenantNotSettable", func(t *testing.T) {
		res := ts.do(t, "POST", "/sessions", `{"agent":"echo","tenant":"other"}`)
		p := wantProblem(t, res, http.StatusBadRequest, "invalid_request")
		if _, ok := problemFields(t, p)["tenant"]; !ok {
			t.Errorf("errors = %v, want tenant named", p["errors"])
		}
	})
}

func TestSessions_CreateChild(t *testing.T) {
	ts := newServer(t, serverOptions{})
	create := func(t *testing.T, agent, parent string) map[string]any {
		t.Helper()
		return ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"`+agent+`","parent_id":"`+parent+`"}`)
	}
	root := ts.createSession(t, "parent")

	child := create(t, "parent", root)
	if child["parent_id"] != root || child["root_id"] != root || child["depth"] != float64(1) {
		t.Errorf("child parent_id, root_id, depth = %v, %v, %v, want %s, %s, 1",
			child["parent_id"], child["root_id"], child["depth"], root, root)
	}
	grandchild := create(t, "echo", child["id"].(string))
	if grandchild["parent_id"] != child["id"] || grandchild["root_id"] != root || grandchild["depth"] != float64(2) {
		t.Errorf("grandchild parent_id, root_id, depth = %v, %v, %v, want %v, %s, 2",
			grandchild["parent_id"], grandchild["root_id"], grandchild["depth"], child["id"], root)
	}

	t.Run("ErrMaxDepth", func(t *testing.T) {
		// The parent agent allows depth 2; the grandchild's agent (echo)
		// allows depth 1, so nothing may go under either.
		res := ts.do(t, "POST", "/sessions", `{"agent":"parent","parent_id":"`+grandchild["id"].(string)+`"}`)
		wantProblem(t, res, http.StatusConflict, "max_depth_exceeded")
		echo := ts.createSession(t, "echo")
		echoChild := create(t, "echo", echo)
		res = ts.do(t, "POST", "/sessions", `{"agent":"echo","parent_id":"`+echoChild["id"].(string)+`"}`)
		wantProblem(t, res, http.StatusConflict, "max_depth_exceeded")
	})

	t.Run("ErrMaxChildren", func(t *testing.T) {
		second := create(t, "echo", root)
		res := ts.do(t, "POST", "/sessions", `{"agent":"echo","parent_id":"`+root+`"}`)
		wantProblem(t, res, http.StatusTooManyRequests, "max_children_exceeded")

		// A closed child no longer counts against the limit.
		if _, err := ts.kernel.CloseSession(kctx(t), second["id"].(string)); err != nil {
			t.Fatal(err)
		}
		create(t, "echo", root)
	})

	t.Run("ErrParentNotFound", func(t *testing.T) {
		for _, parent := range []string{uuid.Must(uuid.NewV7()).String(), "not-a-uuid"} {
			res := ts.do(t, "POST", "/sessions", `{"agent":"echo","parent_id":"`+parent+`"}`)
			wantProblem(t, res, http.StatusNotFound, "parent_not_found")
		}
	})

	t.Run("ErrParentClosed", func(t *testing.T) {
		closed := ts.createSession(t, "parent")
		if _, err := ts.kernel.CloseSession(kctx(t), closed); err != nil {
			t.Fatal(err)
		}
		res := ts.do(t, "POST", "/sessions", `{"agent":"echo","parent_id":"`+closed+`"}`)
		wantProblem(t, res, http.StatusConflict, "session_closed")
	})

	t.Run("Children", func(t *testing.T) {
		page := ts.must(t, http.StatusOK, "GET", "/sessions/"+root+"/children", "")
		ids := listIDs(t, page)
		if len(ids) != 3 || !slices.Contains(ids, child["id"].(string)) {
			t.Errorf("children of root = %v, want 3 including %v", ids, child["id"])
		}
		if slices.Contains(ids, grandchild["id"].(string)) {
			t.Errorf("children of root = %v, want only direct children", ids)
		}
		all, pages := walkPages(t, ts, "/sessions/"+root+"/children", 1)
		if !slices.Equal(all, ids) || pages != 3 {
			t.Errorf("paged children = %v in %d pages, want %v in 3", all, pages, ids)
		}
		leaf := ts.must(t, http.StatusOK, "GET", "/sessions/"+grandchild["id"].(string)+"/children", "")
		if ids := listIDs(t, leaf); len(ids) != 0 || leaf["next_cursor"] != nil {
			t.Errorf("children of a leaf = %v, want an empty last page", leaf)
		}
	})

	runErrorCases(t, ts, []errorCase{
		{name: "ChildrenErrNotFound", method: "GET", path: "/sessions/" + uuid.Must(uuid.NewV7()).String() + "/children",
			status: 404, code: "session_not_found"},
		{name: "ChildrenErrMalformedID", method: "GET", path: "/sessions/nope/children", status: 404, code: "session_not_found"},
		{name: "ChildrenErrLimit", method: "GET", path: "/sessions/" + root + "/children?limit=0",
			status: 400, code: "invalid_request", field: "limit"},
		{name: "ChildrenErrCursor", method: "GET", path: "/sessions/" + root + "/children?cursor=garbage",
			status: 400, code: "invalid_request", field: "cursor"},
		{name: "ChildrenErrMalformedQuery", method: "GET", path: "/sessions/" + root + "/children?cursor=%zz",
			status: 400, code: "invalid_request", field: "query"},
	})
}

func TestSessions_CreateErrors(t *testing.T) {
	ts := newServer(t, serverOptions{})
	manyKeys := make([]string, 65)
	for i := range manyKeys {
		manyKeys[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	long := strings.Repeat("x", 513)
	bad := func(name, body string, status int, code, field, fieldHas string) errorCase {
		return errorCase{name: name, method: "POST", path: "/sessions", body: body, status: status, code: code,
			field: field, fieldHas: fieldHas}
	}
	runErrorCases(t, ts, []errorCase{
		bad("MissingAgent", `{}`, 400, "invalid_request", "agent", "required"),
		bad("EmptyAgent", `{"agent":""}`, 400, "invalid_request", "agent", "required"),
		bad("NullBody", `null`, 400, "invalid_request", "agent", "required"),
		bad("UnknownAgent", `{"agent":"nope"}`, 404, "agent_not_found", "", ""),
		bad("UnknownField", `{"agent":"echo","colour":"red"}`, 400, "invalid_request", "colour", "unknown field"),
		bad("AgentNotString", `{"agent":5}`, 400, "invalid_request", "agent", "must be a string"),
		bad("NameNotString", `{"agent":"echo","name":["a"]}`, 400, "invalid_request", "name", "must be a string"),
		bad("MetadataNotObject", `{"agent":"echo","metadata":"x"}`, 400, "invalid_request", "metadata", "must be an object"),
		bad("MetadataValueNotString", `{"agent":"echo","metadata":{"a":1}}`, 400, "invalid_request", "metadata.a", "must be a string"),
		bad("MemoryNotObject", `{"agent":"echo","memory":[1]}`, 400, "invalid_request", "memory", "must be an object"),
		bad("BodyNotObject", `["echo"]`, 400, "invalid_request", "body", "must be an object"),
		bad("Malformed", `{"agent":"echo"`, 400, "invalid_request", "", ""),
		bad("MalformedToken", `{"agent":echo}`, 400, "invalid_request", "", ""),
		bad("TrailingData", `{"agent":"echo"} {"agent":"echo"}`, 400, "invalid_request", "", ""),
		bad("TrailingGarbage", `{"agent":"echo"}x`, 400, "invalid_request", "", ""),
		bad("EmptyBody", ``, 400, "invalid_request", "", ""),
		bad("NameTooLong", `{"agent":"echo","name":"`+strings.Repeat("n", 257)+`"}`, 400, "invalid_request", "name", "256"),
		bad("MetadataTooManyKeys", `{"agent":"echo","metadata":{`+strings.Join(manyKeys, ",")+`}}`,
			400, "invalid_request", "metadata", "64"),
		bad("MetadataValueTooLong", `{"agent":"echo","metadata":{"k":"`+long+`"}}`, 400, "invalid_request", "metadata.k", "512"),
		bad("MetadataKeyTooLong", `{"agent":"echo","metadata":{"`+strings.Repeat("k", 65)+`":"v"}}`,
			400, "invalid_request", "metadata", "64"),
		bad("MemoryBadKey", `{"agent":"echo","memory":{"bad key!":1}}`, 400, "invalid_request", "memory.bad key!", ""),
		bad("MemoryValueTooLarge", `{"agent":"echo","memory":{"k":"`+strings.Repeat("v", 64<<10)+`"}}`,
			400, "invalid_request", "memory.k", ""),
	})

	t.Run("WrongTypeMessage", func(t *testing.T) {
		res := ts.do(t, "POST", "/sessions", `{"agent":true}`)
		p := wantProblem(t, res, http.StatusBadRequest, "invalid_request")
		msg := problemFields(t, p)["agent"]
		if !strings.HasPrefix(msg, "must be a string") {
			t.Errorf("errors.agent = %q, want it to start with %q", msg, "must be a string")
		}
		// The sent type is named as JSON names it, not as Go does.
		if strings.Contains(strings.ReplaceAll(msg, "boolean", ""), "bool") {
			t.Errorf("errors.agent = %q names Go's bool, want JSON's boolean", msg)
		}
	})

	t.Run("NothingCreated", func(t *testing.T) {
		page := ts.must(t, http.StatusOK, "GET", "/sessions", "")
		if ids := listIDs(t, page); len(ids) != 0 {
			t.Errorf("sessions after failed creates = %v, want none", ids)
		}
	})
}

func TestSessions_List(t *testing.T) {
	ts := newServer(t, serverOptions{})
	var all []string // newest first
	for i := range 7 {
		agent := "echo"
		if i%2 == 1 {
			agent = "tooluser"
		}
		all = slices.Insert(all, 0, ts.createSession(t, agent))
	}
	parent := ts.createSession(t, "parent")
	child := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","parent_id":"`+parent+`"}`)["id"].(string)
	all = slices.Insert(all, 0, parent)
	all = slices.Insert(all, 0, child)
	run := ts.startRun(t, all[len(all)-1], "hello")
	ts.waitRun(t, all[len(all)-1], run)

	t.Run("Default", func(t *testing.T) {
		page := ts.must(t, http.StatusOK, "GET", "/sessions", "")
		if ids := listIDs(t, page); !slices.Equal(ids, all) {
			t.Errorf("ids = %v, want %v (newest first)", ids, all)
		}
		if page["next_cursor"] != nil {
			t.Errorf("next_cursor = %v, want null", page["next_cursor"])
		}
	})

	t.Run("Pagination", func(t *testing.T) {
		for _, limit := range []int{1, 2, 3, 9, 200} {
			ids, pages := walkPages(t, ts, "/sessions", limit)
			if !slices.Equal(ids, all) {
				t.Errorf("limit %d: ids = %v, want %v, each once, newest first", limit, ids, all)
			}
			if want := (len(all) + limit - 1) / limit; pages != want {
				t.Errorf("limit %d: %d pages, want %d", limit, pages, want)
			}
		}
	})

	t.Run("Filters", func(t *testing.T) {
		filter := func(t *testing.T, query string) []string {
			t.Helper()
			return listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions?"+query, ""))
		}
		var tooluser []string
		for _, id := range all {
			s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
			if s["agent"] == "tooluser" {
				tooluser = append(tooluser, id)
			}
		}
		if got := filter(t, "agent=tooluser"); !slices.Equal(got, tooluser) {
			t.Errorf("agent=tooluser: %v, want %v", got, tooluser)
		}
		if got := filter(t, "agent=nope"); len(got) != 0 {
			t.Errorf("agent=nope: %v, want none", got)
		}
		if got := filter(t, "state=completed"); !slices.Equal(got, all[len(all)-1:]) {
			t.Errorf("state=completed: %v, want %v", got, all[len(all)-1:])
		}
		if got := filter(t, "state=active"); len(got) != len(all)-1 {
			t.Errorf("state=active: %d sessions, want %d", len(got), len(all)-1)
		}
		if got := filter(t, "parent_id="+parent); !slices.Equal(got, []string{child}) {
			t.Errorf("parent_id: %v, want [%s]", got, child)
		}
		ids, _ := walkPages(t, ts, "/sessions?agent=echo&state=active", 1)
		for _, id := range ids {
			s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
			if s["agent"] != "echo" || s["state"] != "active" {
				t.Errorf("agent=echo&state=active listed %v", s)
			}
		}
	})

	runErrorCases(t, ts, []errorCase{
		{name: "LimitZero", method: "GET", path: "/sessions?limit=0", status: 400, code: "invalid_request", field: "limit"},
		{name: "LimitTooLarge", method: "GET", path: "/sessions?limit=201", status: 400, code: "invalid_request", field: "limit"},
		{name: "LimitNegative", method: "GET", path: "/sessions?limit=-1", status: 400, code: "invalid_request", field: "limit"},
		{name: "LimitNotNumber", method: "GET", path: "/sessions?limit=x", status: 400, code: "invalid_request", field: "limit"},
		{name: "CursorGarbage", method: "GET", path: "/sessions?cursor=garbage", status: 400, code: "invalid_request", field: "cursor"},
		{name: "CursorNotBase64", method: "GET", path: "/sessions?cursor=%25%25%25", status: 400, code: "invalid_request", field: "cursor"},
		{name: "StateUnknown", method: "GET", path: "/sessions?state=sleeping", status: 400, code: "invalid_request", field: "state"},
	})

	t.Run("LimitBounds", func(t *testing.T) {
		for _, limit := range []string{"1", "200"} {
			ts.must(t, http.StatusOK, "GET", "/sessions?limit="+limit, "")
		}
	})
}

func TestSessions_Get(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	if s["id"] != id || s["agent"] != "echo" {
		t.Errorf("session = %v, want id %s agent echo", s, id)
	}
	runErrorCases(t, ts, []errorCase{
		{name: "ErrNotFound", method: "GET", path: "/sessions/" + uuid.Must(uuid.NewV7()).String(), status: 404, code: "session_not_found"},
		{name: "ErrMalformedID", method: "GET", path: "/sessions/not-an-id", status: 404, code: "session_not_found"},
		{name: "ErrIDCutShort", method: "GET", path: "/sessions/" + id[:len(id)-1], status: 404, code: "session_not_found"},
		{name: "ErrUppercaseOfAnother", method: "GET", path: "/sessions/" + strings.Repeat("A", 36), status: 404, code: "session_not_found"},
	})
}

func TestSessions_Update(t *testing.T) {
	ts := newServer(t, serverOptions{})
	s := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","name":"old","metadata":{"a":"1","b":"2"}}`)
	id := s["id"].(string)

	t.Run("Name", func(t *testing.T) {
		got := ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"name":"new"}`)
		if got["name"] != "new" || fmt.Sprint(got["metadata"]) != "map[a:1 b:2]" {
			t.Errorf("after PATCH name: name %v metadata %v, want new and unchanged metadata", got["name"], got["metadata"])
		}
		if got["updated_at"].(string) < s["updated_at"].(string) {
			t.Errorf("updated_at = %v, want at or after %v", got["updated_at"], s["updated_at"])
		}
	})

	t.Run("MetadataMerge", func(t *testing.T) {
		got := ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"metadata":{"a":null,"b":"20","c":"3"}}`)
		if fmt.Sprint(got["metadata"]) != "map[b:20 c:3]" || got["name"] != "new" {
			t.Errorf("after merge: metadata %v name %v, want map[b:20 c:3] and name kept", got["metadata"], got["name"])
		}
		again := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
		if fmt.Sprint(again["metadata"]) != "map[b:20 c:3]" {
			t.Errorf("GET after merge: metadata %v, want map[b:20 c:3]", again["metadata"])
		}
	})

	t.Run("Empty", func(t *testing.T) {
		got := ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{}`)
		if got["name"] != "new" || fmt.Sprint(got["metadata"]) != "map[b:20 c:3]" {
			t.Errorf("empty PATCH changed the session: %v", got)
		}
	})

	runErrorCases(t, ts, []errorCase{
		{name: "ErrUnknownField", method: "PATCH", path: "/sessions/" + id, body: `{"agent":"tooluser"}`,
			status: 400, code: "invalid_request", field: "agent", fieldHas: "unknown field"},
		{name: "ErrNameType", method: "PATCH", path: "/sessions/" + id, body: `{"name":5}`,
			status: 400, code: "invalid_request", field: "name", fieldHas: "must be a string"},
		{name: "ErrMetadataValueType", method: "PATCH", path: "/sessions/" + id, body: `{"metadata":{"a":[]}}`,
			status: 400, code: "invalid_request", field: "metadata.a", fieldHas: "must be a string"},
		{name: "ErrNameTooLong", method: "PATCH", path: "/sessions/" + id, body: `{"name":"` + strings.Repeat("n", 257) + `"}`,
			status: 400, code: "invalid_request", field: "name"},
		{name: "ErrMetadataValueTooLong", method: "PATCH", path: "/sessions/" + id, body: `{"metadata":{"z":"` + strings.Repeat("v", 513) + `"}}`,
			status: 400, code: "invalid_request", field: "metadata.z"},
		{name: "ErrMalformed", method: "PATCH", path: "/sessions/" + id, body: `{"name":`, status: 400, code: "invalid_request"},
		{name: "ErrEmptyBody", method: "PATCH", path: "/sessions/" + id, status: 400, code: "invalid_request"},
		{name: "ErrNotFound", method: "PATCH", path: "/sessions/" + uuid.Must(uuid.NewV7()).String(), body: `{"name":"x"}`,
			status: 404, code: "session_not_found"},
		{name: "ErrMalformedID", method: "PATCH", path: "/sessions/x", body: `{"name":"x"}`, status: 404, code: "session_not_found"},
	})

	t.Run("FailedPatchChangesNothing", func(t *testing.T) {
		got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
		if got["name"] != "new" || fmt.Sprint(got["metadata"]) != "map[b:20 c:3]" {
			t.Errorf("session after failed patches = %v", got)
		}
	})
}

func TestSessions_Delete(t *testing.T) {
	ts := newServer(t, serverOptions{})

	t.Run("OK", func(t *testing.T) {
		id := ts.createSession(t, "echo")
		ts.waitRun(t, id, ts.startRun(t, id, "hi"))
		res := ts.do(t, "DELETE", "/sessions/"+id, "")
		if res.status != http.StatusNoContent || len(res.body) != 0 {
			t.Fatalf("DELETE = %d %q, want 204 and no body", res.status, res.body)
		}
		for _, path := range []string{"", "/runs", "/messages", "/memory"} {
			wantProblem(t, ts.do(t, "GET", "/sessions/"+id+path, ""), http.StatusNotFound, "session_not_found")
		}
		wantProblem(t, ts.do(t, "DELETE", "/sessions/"+id, ""), http.StatusNotFound, "session_not_found")
	})

	t.Run("ErrHasChildren", func(t *testing.T) {
		root := ts.createSession(t, "parent")
		child := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"parent","parent_id":"`+root+`"}`)["id"].(string)
		grandchild := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","parent_id":"`+child+`"}`)["id"].(string)
		for _, path := range []string{"/sessions/" + root, "/sessions/" + root + "?cascade=false"} {
			p := wantProblem(t, ts.do(t, "DELETE", path, ""), http.StatusConflict, "session_has_children")
			if p["children"] != float64(1) {
				t.Errorf("children = %v, want 1", p["children"])
			}
		}
		ts.must(t, http.StatusOK, "GET", "/sessions/"+root, "")

		res := ts.do(t, "DELETE", "/sessions/"+root+"?cascade=true", "")
		if res.status != http.StatusNoContent {
			t.Fatalf("DELETE ?cascade=true = %d %s, want 204", res.status, res.body)
		}
		for _, id := range []string{root, child, grandchild} {
			wantProblem(t, ts.do(t, "GET", "/sessions/"+id, ""), http.StatusNotFound, "session_not_found")
		}
	})

	t.Run("CascadeLeaf", func(t *testing.T) {
		id := ts.createSession(t, "echo")
		if res := ts.do(t, "DELETE", "/sessions/"+id+"?cascade=1", ""); res.status != http.StatusNoContent {
			t.Fatalf("DELETE ?cascade=1 = %d %s, want 204", res.status, res.body)
		}
	})

	t.Run("Closed", func(t *testing.T) {
		id := ts.createSession(t, "echo")
		if _, err := ts.kernel.CloseSession(kctx(t), id); err != nil {
			t.Fatal(err)
		}
		if s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, ""); s["state"] != string(session.StateClosed) {
			t.Errorf("state = %v, want closed", s["state"])
		}
		if res := ts.do(t, "DELETE", "/sessions/"+id, ""); res.status != http.StatusNoContent {
			t.Fatalf("DELETE closed = %d %s, want 204", res.status, res.body)
		}
	})

	id := ts.createSession(t, "echo")
	runErrorCases(t, ts, []errorCase{
		{name: "ErrCascadeValue", method: "DELETE", path: "/sessions/" + id + "?cascade=maybe", status: 400, code: "invalid_request", field: "cascade"},
		{name: "ErrNotFound", method: "DELETE", path: "/sessions/" + uuid.Must(uuid.NewV7()).String(), status: 404, code: "session_not_found"},
		{name: "ErrMalformedID", method: "DELETE", path: "/sessions/zzz", status: 404, code: "session_not_found"},
	})
	ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
}

func TestSessions_DeleteCancelsRun(t *testing.T) {
	rec := &eventRecorder{}
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Observers: []kernel.Observer{rec}}})
	id := ts.createSession(t, "waiter") // its run waits in a tool until cancelled
	runID := ts.startRun(t, id, "go")
	waitRunning(t, ts, id)

	if res := ts.do(t, "DELETE", "/sessions/"+id, ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s, want 204", res.status, res.body)
	}
	// DELETE returns once the run has recorded its end.
	evs := rec.runEvents(runID)
	if len(evs) == 0 {
		t.Fatal("no events recorded for the run")
	}
	last := evs[len(evs)-1]
	if last.Type != session.EventRunFinished {
		t.Fatalf("last event = %s, want RUN_FINISHED", last.Type)
	}
	if !strings.Contains(string(last.Data), `"cancelled"`) || !strings.Contains(string(last.Meta), `"reason":"cancelled"`) {
		t.Errorf("RUN_FINISHED = %s meta %s, want outcome and reason cancelled", last.Data, last.Meta)
	}
	wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/runs/"+runID, ""), http.StatusNotFound, "session_not_found")
}

// TestSessions_TTL: a session created with a ttl shows it and when it
// expires; a bad ttl names the field.
func TestSessions_TTL(t *testing.T) {
	ts := newServer(t, serverOptions{})
	s := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","ttl":"90m"}`)
	if s["ttl"] != "1h30m0s" || s["expires_at"] == nil {
		t.Errorf("ttl, expires_at = %v, %v", s["ttl"], s["expires_at"])
	}
	plain := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`)
	if plain["ttl"] != nil || plain["expires_at"] != nil {
		t.Errorf("no ttl: ttl, expires_at = %v, %v, want null", plain["ttl"], plain["expires_at"])
	}
	for _, bad := range []string{`"soon"`, `"-5m"`, `"0s"`, `3600`} {
		p := wantProblem(t, ts.do(t, "POST", "/sessions", `{"agent":"echo","ttl":`+bad+`}`), http.StatusBadRequest, "invalid_request")
		if _, ok := p["errors"].(map[string]any)["ttl"]; !ok {
			t.Errorf("ttl %s: errors = %v, want ttl named", bad, p["errors"])
		}
	}
}

// TestSessions_Inherit: a child created with inherit.memory copy starts
// with its parent's memory and says so.
func TestSessions_Inherit(t *testing.T) {
	ts := newServer(t, serverOptions{})
	parent := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"parent","memory":{"user":"Ada","lang":"en"}}`)["id"].(string)
	child := ts.must(t, http.StatusCreated, "POST", "/sessions",
		`{"agent":"echo","parent_id":"`+parent+`","inherit":{"memory":"copy"},"memory":{"lang":"fr"}}`)
	if fmt.Sprint(child["inherit"]) != "map[memory:copy]" {
		t.Errorf("inherit = %v", child["inherit"])
	}
	mem := ts.must(t, http.StatusOK, "GET", "/sessions/"+child["id"].(string)+"/memory", "")
	if got := fmt.Sprint(mem["data"]); !strings.Contains(got, "key:lang") || !strings.Contains(got, "value:fr") || !strings.Contains(got, "value:Ada") {
		t.Errorf("child memory = %v, want the parent's user and its own lang", got)
	}
	plain := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","parent_id":"`+parent+`"}`)
	if fmt.Sprint(plain["inherit"]) != "map[memory:none]" {
		t.Errorf("default inherit = %v", plain["inherit"])
	}
	for _, bad := range []string{
		`{"agent":"echo","parent_id":"` + parent + `","inherit":{"memory":"all"}}`,
		`{"agent":"echo","inherit":{"memory":"copy"}}`,
		`{"agent":"echo","parent_id":"` + parent + `","inherit":{"files":"copy"}}`,
	} {
		wantProblem(t, ts.do(t, "POST", "/sessions", bad), http.StatusBadRequest, "invalid_request")
	}
}
