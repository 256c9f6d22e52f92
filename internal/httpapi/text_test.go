package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestDecode_InvalidUTF8 sends bytes that are not UTF-8 in every kind of
// field a client writes: each request is refused with 400 naming the
// field, and nothing it asked for happens.
func TestDecode_InvalidUTF8(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	const bad = "\xff\xfe"
	cases := []errorCase{
		{name: "Input", method: "POST", path: "/sessions/" + id + "/run", body: `{"input":"hi ` + bad + `"}`, field: "input"},
		{name: "SessionName", method: "POST", path: "/sessions", body: `{"agent":"echo","name":"` + bad + `"}`, field: "name"},
		{name: "Agent", method: "POST", path: "/sessions", body: `{"agent":"ec` + bad + `ho"}`, field: "agent"},
		{name: "MetadataValue", method: "POST", path: "/sessions", body: `{"agent":"echo","metadata":{"team":"a` + bad + `"}}`, field: "metadata.team"},
		{name: "MetadataKey", method: "POST", path: "/sessions", body: `{"agent":"echo","metadata":{"te` + bad + `am":"a"}}`, field: "metadata", fieldHas: "key"},
		{name: "InitialMemory", method: "POST", path: "/sessions", body: `{"agent":"echo","memory":{"k":{"deep":["ok","` + bad + `"]}}}`, field: "memory.k.deep[1]"},
		{name: "PatchName", method: "PATCH", path: "/sessions/" + id, body: `{"name":"` + bad + `"}`, field: "name"},
		{name: "PatchMetadata", method: "PATCH", path: "/sessions/" + id, body: `{"metadata":{"team":"` + bad + `"}}`, field: "metadata.team"},
		{name: "MemoryValue", method: "PUT", path: "/sessions/" + id + "/memory/k", body: `{"value":{"a":[1,{"b":"` + bad + `"}]}}`, field: "value.a[1].b"},
		{name: "MemoryString", method: "PUT", path: "/sessions/" + id + "/memory/k", body: `{"value":"` + bad + `"}`, field: "value"},
		{name: "TopLevelKey", method: "POST", path: "/sessions", body: `{"` + bad + `":1}`, field: "body", fieldHas: "key"},
		{name: "NotJSON", method: "POST", path: "/sessions", body: bad, field: "body"},
		{name: "MemoryKeyInURL", method: "PUT", path: "/sessions/" + id + "/memory/k%FF", body: `{"value":1}`, field: "key"},
		{name: "QueryValue", method: "GET", path: "/sessions?agent=%FF", field: "agent"},
		{name: "QueryName", method: "GET", path: "/sessions?%FF=1", field: "query"},
		{name: "IdempotencyKey", method: "POST", path: "/sessions/" + id + "/run", body: `{"input":"hi"}`,
			header: []string{"Idempotency-Key", "k" + bad}, field: "Idempotency-Key"},
	}
	for i := range cases {
		cases[i].status, cases[i].code = http.StatusBadRequest, "invalid_request"
		if cases[i].fieldHas == "" {
			cases[i].fieldHas = "not valid UTF-8"
		}
	}
	runErrorCases(t, ts, cases)

	t.Run("NothingHappened", func(t *testing.T) {
		if runs := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs", "")["data"].([]any); len(runs) != 0 {
			t.Errorf("%d runs, want none", len(runs))
		}
		if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions", "")); len(ids) != 1 {
			t.Errorf("sessions %v, want only %s", ids, id)
		}
		ts.must(t, http.StatusNotFound, "GET", "/sessions/"+id+"/memory/k", "")
		if s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, ""); s["name"] != nil || len(s["metadata"].(map[string]any)) != 0 {
			t.Errorf("session = %v, want it unchanged", s)
		}
	})

	t.Run("ValidTextKept", func(t *testing.T) {
		// Multi-byte text, including U+FFFD sent on purpose, is text.
		const text = "日本語 ünïcödé 🦀 \uFFFD"
		s := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","name":"`+text+`","metadata":{"ключ":"`+text+`"}}`)
		if s["name"] != text || s["metadata"].(map[string]any)["ключ"] != text {
			t.Errorf("session = %v, want the text as sent", s)
		}
		e := ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/memory/k", `{"value":"`+text+`"}`)
		if e["value"] != text {
			t.Errorf("memory value = %q, want %q", e["value"], text)
		}
		ts.must(t, http.StatusOK, "GET", "/sessions?agent="+url.QueryEscape("échο"), "")
	})
}
