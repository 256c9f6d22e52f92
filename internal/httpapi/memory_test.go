package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

func TestMemory_PutGetDelete(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	base := "/sessions/" + id + "/memory/"

	values := []struct {
		name, key, value string
	}{
		{"String", "greeting", `"hello"`},
		{"Number", "count", `42`},
		{"Bool", "flag", `true`},
		{"Null", "nothing", `null`},
		{"Array", "list", `[1,"two",null]`},
		{"Object", "prefs", `{"lang":"en","nested":{"deep":[1,2]}}`},
		{"Whitespace", "spaced", "{ \"a\" :\n 1 }"},
	}
	for _, v := range values {
		t.Run(v.name, func(t *testing.T) {
			res := ts.do(t, "PUT", base+v.key, `{"value":`+v.value+`}`)
			if res.status != http.StatusOK {
				t.Fatalf("PUT = %d %s, want 200", res.status, res.body)
			}
			put := res.json(t)
			want := compactJSON(t, []byte(v.value))
			if put["key"] != v.key || !isRFC3339UTC(put["updated_at"]) {
				t.Errorf("PUT = %s, want key %s and updated_at", res.body, v.key)
			}
			got := ts.do(t, "GET", base+v.key, "")
			if got.status != http.StatusOK {
				t.Fatalf("GET = %d %s, want 200", got.status, got.body)
			}
			if raw := rawMember(t, got.body, "value"); raw != want {
				t.Errorf("GET value = %s, want %s", raw, want)
			}
			if raw := rawMember(t, res.body, "value"); raw != want {
				t.Errorf("PUT value = %s, want %s", raw, want)
			}
		})
	}

	t.Run("Replace", func(t *testing.T) {
		ts.must(t, http.StatusOK, "PUT", base+"count", `{"value":43}`)
		if got := ts.must(t, http.StatusOK, "GET", base+"count", ""); got["value"] != float64(43) {
			t.Errorf("value = %v, want 43", got["value"])
		}
	})

	t.Run("ListSorted", func(t *testing.T) {
		list := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/memory", "")
		data := list["data"].([]any)
		var keys []string
		for _, d := range data {
			keys = append(keys, d.(map[string]any)["key"].(string))
		}
		want := "count flag greeting list nothing prefs spaced"
		if strings.Join(keys, " ") != want {
			t.Errorf("keys = %v, want %s", keys, want)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		res := ts.do(t, "DELETE", base+"flag", "")
		if res.status != http.StatusNoContent || len(res.body) != 0 {
			t.Fatalf("DELETE = %d %q, want 204 and no body", res.status, res.body)
		}
		wantProblem(t, ts.do(t, "GET", base+"flag", ""), http.StatusNotFound, "memory_key_not_found")
		wantProblem(t, ts.do(t, "DELETE", base+"flag", ""), http.StatusNotFound, "memory_key_not_found")
	})

	t.Run("EmptyList", func(t *testing.T) {
		other := ts.createSession(t, "echo")
		list := ts.must(t, http.StatusOK, "GET", "/sessions/"+other+"/memory", "")
		if data, ok := list["data"].([]any); !ok || len(data) != 0 {
			t.Errorf("memory of a new session = %v, want data: []", list)
		}
	})
}

func TestMemory_KeysWithSlashes(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	base := "/sessions/" + id + "/memory/"

	ts.must(t, http.StatusOK, "PUT", base+"a/b/c", `{"value":"raw"}`)
	for _, path := range []string{"a/b/c", "a%2Fb%2Fc", "a%2fb/c"} {
		got := ts.must(t, http.StatusOK, "GET", base+path, "")
		if got["key"] != "a/b/c" || got["value"] != "raw" {
			t.Errorf("GET %s = %v, want key a/b/c value raw", path, got)
		}
	}
	ts.must(t, http.StatusOK, "PUT", base+"x%2Fy", `{"value":"encoded"}`)
	if got := ts.must(t, http.StatusOK, "GET", base+"x/y", ""); got["key"] != "x/y" || got["value"] != "encoded" {
		t.Errorf("GET x/y = %v, want the value PUT as x%%2Fy", got)
	}
	ts.must(t, http.StatusOK, "PUT", base+"dots.and-dashes_1", `{"value":1}`)

	list := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/memory", "")
	var keys []string
	for _, d := range list["data"].([]any) {
		keys = append(keys, d.(map[string]any)["key"].(string))
	}
	if strings.Join(keys, " ") != "a/b/c dots.and-dashes_1 x/y" {
		t.Errorf("keys = %v, want [a/b/c dots.and-dashes_1 x/y]", keys)
	}

	if res := ts.do(t, "DELETE", base+"a%2Fb%2Fc", ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE encoded = %d %s, want 204", res.status, res.body)
	}
	wantProblem(t, ts.do(t, "GET", base+"a/b/c", ""), http.StatusNotFound, "memory_key_not_found")
}

func TestMemory_Errors(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	base := "/sessions/" + id + "/memory/"
	ts.must(t, http.StatusOK, "PUT", base+"k", `{"value":1}`)
	unknown := uuid.Must(uuid.NewV7()).String()
	put := func(name, key, body string, status int, code, field string) errorCase {
		return errorCase{name: name, method: "PUT", path: base + key, body: body, status: status, code: code, field: field}
	}
	runErrorCases(t, ts, []errorCase{
		put("BadKeySpace", "bad%20key%21", `{"value":1}`, 400, "invalid_request", "key"),
		put("BadKeyColon", "a:b", `{"value":1}`, 400, "invalid_request", "key"),
		put("BadKeyUnicode", "cl%C3%A9", `{"value":1}`, 400, "invalid_request", "key"),
		put("KeyTooLong", strings.Repeat("k", 129), `{"value":1}`, 400, "invalid_request", "key"),
		put("EmptyKey", "", `{"value":1}`, 400, "invalid_request", "key"),
		put("MissingValue", "k", `{}`, 400, "invalid_request", "value"),
		put("UnknownField", "k", `{"value":1,"ttl":5}`, 400, "invalid_request", "ttl"),
		put("Malformed", "k", `{"value":`, 400, "invalid_request", ""),
		put("EmptyBody", "k", ``, 400, "invalid_request", ""),
		put("ValueTooLarge", "k", `{"value":"`+strings.Repeat("v", 64<<10)+`"}`, 400, "invalid_request", "value"),
		{name: "PutUnknownSession", method: "PUT", path: "/sessions/" + unknown + "/memory/k", body: `{"value":1}`,
			status: 404, code: "session_not_found"},
		{name: "GetUnknownSession", method: "GET", path: "/sessions/" + unknown + "/memory/k", status: 404, code: "session_not_found"},
		{name: "ListUnknownSession", method: "GET", path: "/sessions/" + unknown + "/memory", status: 404, code: "session_not_found"},
		{name: "DeleteUnknownSession", method: "DELETE", path: "/sessions/" + unknown + "/memory/k", status: 404, code: "session_not_found"},
		{name: "ListMalformedSession", method: "GET", path: "/sessions/nope/memory", status: 404, code: "session_not_found"},
		{name: "GetUnknownKey", method: "GET", path: base + "missing", status: 404, code: "memory_key_not_found"},
		{name: "DeleteUnknownKey", method: "DELETE", path: base + "missing", status: 404, code: "memory_key_not_found"},
	})

	t.Run("ValueAtLimit", func(t *testing.T) {
		// 64 KiB of JSON text: the string and its two quotes.
		ts.must(t, http.StatusOK, "PUT", base+"big", `{"value":"`+strings.Repeat("v", 64<<10-2)+`"}`)
	})

	t.Run("FailedPutsStoreNothing", func(t *testing.T) {
		list := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/memory", "")
		if n := len(list["data"].([]any)); n != 2 {
			t.Errorf("memory holds %d entries, want 2 (k, big)", n)
		}
		if got := ts.must(t, http.StatusOK, "GET", base+"k", ""); got["value"] != float64(1) {
			t.Errorf("k = %v, want 1", got["value"])
		}
	})
}

func TestMemory_KeyDecodedOnce(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	base := "/sessions/" + id + "/memory/"
	// x%2541 is the key "x%41", which is not a valid key; decoding the
	// path twice would turn it into "xA".
	res := ts.do(t, "PUT", base+"x%2541", `{"value":1}`)
	wantProblem(t, res, http.StatusBadRequest, "invalid_request")
	wantProblem(t, ts.do(t, "GET", base+"xA", ""), http.StatusNotFound, "memory_key_not_found")
}

func TestMemory_Full(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Limits: kernel.Limits{MaxMemoryEntries: 2}}})
	id := ts.createSession(t, "echo")
	base := "/sessions/" + id + "/memory/"
	ts.must(t, http.StatusOK, "PUT", base+"a", `{"value":1}`)
	ts.must(t, http.StatusOK, "PUT", base+"b", `{"value":2}`)

	wantProblem(t, ts.do(t, "PUT", base+"c", `{"value":3}`), http.StatusTooManyRequests, "memory_full")
	// Replacing an existing entry needs no room.
	ts.must(t, http.StatusOK, "PUT", base+"b", `{"value":20}`)
	ts.must(t, http.StatusNoContent, "DELETE", base+"a", "")
	ts.must(t, http.StatusOK, "PUT", base+"c", `{"value":3}`)

	t.Run("SeedTooMany", func(t *testing.T) {
		res := ts.do(t, "POST", "/sessions", `{"agent":"echo","memory":{"a":1,"b":2,"c":3}}`)
		p := wantProblem(t, res, http.StatusBadRequest, "invalid_request")
		if _, ok := problemFields(t, p)["memory"]; !ok {
			t.Errorf("errors = %v, want memory named", p["errors"])
		}
	})
}

func TestMemory_SessionClosed(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	base := "/sessions/" + id + "/memory/"
	ts.must(t, http.StatusOK, "PUT", base+"kept", `{"value":"yes"}`)
	if _, err := ts.kernel.CloseSession(kctx(t), id); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, ts.do(t, "PUT", base+"new", `{"value":1}`), http.StatusConflict, "session_closed")
	wantProblem(t, ts.do(t, "PUT", base+"kept", `{"value":"changed"}`), http.StatusConflict, "session_closed")
	if got := ts.must(t, http.StatusOK, "GET", base+"kept", ""); got["value"] != "yes" {
		t.Errorf("kept = %v after a closed session's PUT, want yes", got["value"])
	}
}

// rawMember returns the compacted JSON text of a top-level member of body.
func rawMember(t *testing.T, body []byte, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	raw, ok := m[name]
	if !ok {
		t.Fatalf("%s has no member %q", body, name)
	}
	return compactJSON(t, raw)
}
