package httpapi_test

import (
	"net/http"
	"testing"
)

// TestDecode_Strict sends bodies that a lenient decoder would read as
// something other than what was sent: a member twice, a member spelled
// in another case, a lone UTF-16 surrogate, NUL in a name, an id or a
// key, the ids "." and "..", and memory keys a URL cannot address. Each
// is refused with 400 invalid_request naming the field, on every route
// that reads JSON, and nothing it asked for happens.
func TestDecode_Strict(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	slow := ts.createSession(t, "slow")
	run := ts.startRun(t, slow, "go")
	defer ts.must(t, http.StatusOK, "POST", "/sessions/"+slow+"/runs/"+run+"/cancel", "")
	memory := "/sessions/" + id + "/memory/"
	c := func(name, method, path, body, field, fieldHas string) errorCase {
		return errorCase{name: name, method: method, path: path, body: body, field: field, fieldHas: fieldHas,
			status: http.StatusBadRequest, code: "invalid_request"}
	}
	runErrorCases(t, ts, []errorCase{
		// A member twice: encoding/json kept the last one.
		c("DuplicateAgent", "POST", "/sessions", `{"agent":"echo","agent":"nope"}`, "agent", "more than once"),
		c("DuplicateMetadataKey", "POST", "/sessions", `{"agent":"echo","metadata":{"team":"a","team":"b"}}`, "metadata.team", "more than once"),
		c("DuplicateInput", "POST", "/sessions/"+id+"/run", `{"input":"hi","input":"rm -rf"}`, "input", "more than once"),
		c("DuplicateInMemoryValue", "PUT", memory+"k", `{"value":{"a":[{"b":1,"b":2}]}}`, "value.a[0].b", "more than once"),
		c("DuplicatePatchName", "PATCH", "/sessions/"+id, `{"name":"a","name":"b"}`, "name", "more than once"),
		c("DuplicateOneCall", "POST", "/run", `{"agent":"echo","input":"hi","session_id":"s1","session_id":"s2"}`, "session_id", "more than once"),
		c("DuplicateFork", "POST", "/sessions/"+id+"/fork", `{"at_message":1,"at_message":2}`, "at_message", "more than once"),
		c("DuplicateClose", "POST", "/sessions/"+id+"/close", `{"reason":"a","reason":"b"}`, "reason", "more than once"),
		c("DuplicateRepair", "POST", "/sessions/"+id+"/repair", `{"dry_run":true,"dry_run":false}`, "dry_run", "more than once"),
		c("DuplicateDecision", "POST", "/sessions/"+slow+"/runs/"+run+"/approvals/call-1",
			`{"decision":"deny","decision":"approve"}`, "decision", "more than once"),
		c("DuplicateThreadID", "POST", "/agents/echo/agui", `{"threadId":"t-a","threadId":"t-b","runId":"r1","messages":[]}`,
			"threadId", "more than once"),
		// Names matched exactly: encoding/json matched {"Agent":...} to agent.
		c("CaseAgent", "POST", "/sessions", `{"Agent":"echo"}`, "Agent", `"agent"`),
		c("CaseInput", "POST", "/sessions/"+id+"/run", `{"INPUT":"hi"}`, "INPUT", `"input"`),
		c("CaseValue", "PUT", memory+"k", `{"Value":1}`, "Value", `"value"`),
		c("CaseIfBusy", "POST", "/run", `{"agent":"echo","input":"hi","If_Busy":"queue"}`, "If_Busy", `"if_busy"`),
		c("CaseNested", "POST", "/sessions/"+id+"/run", `{"input":"hi","overrides":{"Model":"m"}}`, "overrides.Model", `"model"`),
		// AG-UI's input is loose (unknown members are ignored), but a
		// member in another case is not the one it resembles.
		c("CaseThreadID", "POST", "/agents/echo/agui", `{"ThreadId":"t-c","runId":"r1","messages":[]}`, "threadId", "required"),
		// A lone surrogate is no character: encoding/json stored U+FFFD.
		c("SurrogateName", "POST", "/sessions", `{"agent":"echo","name":"\ud800"}`, "name", "surrogate"),
		c("SurrogateInput", "POST", "/sessions/"+id+"/run", `{"input":"hi \udc00 there"}`, "input", "surrogate"),
		c("SurrogateReversedPair", "POST", "/sessions/"+id+"/run", `{"input":"\ude00\ud83d"}`, "input", "surrogate"),
		c("SurrogateMemoryValue", "PUT", memory+"k", `{"value":{"x":["ok","\ud83d"]}}`, "value.x[1]", "surrogate"),
		c("SurrogateMetadataKey", "POST", "/sessions", `{"agent":"echo","metadata":{"k\udfff":"v"}}`, "metadata", "surrogate"),
		c("SurrogateAGUIMessage", "POST", "/agents/echo/agui",
			`{"threadId":"t-d","runId":"r1","messages":[{"id":"m1","role":"user","content":"\ud800"}]}`, "messages[0].content", "surrogate"),
		// NUL in names, ids and keys.
		c("NULName", "POST", "/sessions", `{"agent":"echo","name":"a\u0000b"}`, "name", "NUL"),
		c("NULAgent", "POST", "/sessions", `{"agent":"echo\u0000"}`, "agent", "NUL"),
		c("NULParentID", "POST", "/sessions", `{"agent":"echo","parent_id":"`+id+`\u0000"}`, "parent_id", "NUL"),
		c("NULMetadataKey", "POST", "/sessions", `{"agent":"echo","metadata":{"a\u0000":"v"}}`, "metadata", "NUL"),
		c("NULMetadataValue", "POST", "/sessions", `{"agent":"echo","metadata":{"a":"v\u0000"}}`, "metadata.a", "NUL"),
		c("NULPatchName", "PATCH", "/sessions/"+id, `{"name":"\u0000"}`, "name", "NUL"),
		c("NULPatchMetadataKey", "PATCH", "/sessions/"+id, `{"metadata":{"\u0000":"v"}}`, "metadata", "NUL"),
		c("NULOneCallAgent", "POST", "/run", `{"agent":"echo\u0000","input":"hi"}`, "agent", "NUL"),
		c("NULOverrideModel", "POST", "/sessions/"+id+"/run", `{"input":"hi","overrides":{"model":"m\u0000"}}`, "overrides.model", "NUL"),
		c("NULClientID", "POST", "/sessions", `{"agent":"echo","id":"a\u0000b"}`, "id", ""),
		c("NULSessionID", "POST", "/run", `{"agent":"echo","input":"hi","session_id":"a\u0000"}`, "session_id", ""),
		c("NULMemoryKeyInURL", "PUT", memory+"a%00b", `{"value":1}`, "key", ""),
		c("NULInitialMemoryKey", "POST", "/sessions", `{"agent":"echo","memory":{"a\u0000":1}}`, "memory", "NUL"),
		// "." and ".." are path segments, not ids: /sessions/../events
		// is /events to every client and proxy.
		c("DotID", "POST", "/sessions", `{"agent":"echo","id":"."}`, "id", ""),
		c("DotDotID", "POST", "/sessions", `{"agent":"echo","id":".."}`, "id", ""),
		c("DotDotSessionID", "POST", "/run", `{"agent":"echo","input":"hi","session_id":".."}`, "session_id", ""),
		c("DotThreadID", "POST", "/agents/echo/agui", `{"threadId":".","runId":"r1","messages":[]}`, "threadId", ""),
		c("DotDotRunID", "POST", "/agents/echo/agui", `{"threadId":"t-e","runId":"..","messages":[]}`, "runId", ""),
		// Memory keys are plain keys: segments of [A-Za-z0-9._-] joined by
		// "/", none empty, "." or "..", which URLs would remove.
		c("MemoryKeyDotDotSegment", "PUT", memory+"a/../b", `{"value":1}`, "key", "segment"),
		c("MemoryKeyEscapedDotDot", "PUT", memory+"a/%2E%2E/b", `{"value":1}`, "key", "segment"),
		c("MemoryKeyDotSegment", "PUT", memory+"./a", `{"value":1}`, "key", "segment"),
		c("MemoryKeyDotDot", "PUT", memory+"..", `{"value":1}`, "key", "segment"),
		c("MemoryKeyEmptySegment", "PUT", memory+"a//b", `{"value":1}`, "key", "segment"),
		c("MemoryKeyTrailingSlash", "PUT", memory+"a/", `{"value":1}`, "key", "segment"),
		c("MemoryKeyLeadingSlash", "PUT", memory+"%2Fa", `{"value":1}`, "key", "segment"),
		c("MemoryKeyBadChar", "PUT", memory+"a%20b", `{"value":1}`, "key", "A-Z"),
		c("InitialMemoryKeyDotDot", "POST", "/sessions", `{"agent":"echo","memory":{"a/../b":1}}`, "memory.a/../b", "segment"),
	})

	t.Run("NothingHappened", func(t *testing.T) {
		if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions", "")); len(ids) != 2 {
			t.Errorf("sessions %v, want only %s and %s", ids, id, slow)
		}
		if runs := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs", "")["data"].([]any); len(runs) != 0 {
			t.Errorf("%d runs, want none", len(runs))
		}
		if entries := ts.must(t, http.StatusOK, "GET", memory[:len(memory)-1], "")["data"].([]any); len(entries) != 0 {
			t.Errorf("memory %v, want none", entries)
		}
		if s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, ""); s["name"] != nil || s["state"] != "active" {
			t.Errorf("session = %v, want it unchanged", s)
		}
	})

	t.Run("PlainTextKept", func(t *testing.T) {
		// A surrogate pair is a character; NUL is text where text is
		// free; keys with segments and dots inside them are plain keys.
		s := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","name":"\ud83e\udd80 crab"}`)
		if s["name"] != "🦀 crab" {
			t.Errorf("name = %q, want the crab", s["name"])
		}
		for _, key := range []string{"a/b.c/d-e_f", "...", "a..b/.c/d.", "v1.2"} {
			ts.must(t, http.StatusOK, "PUT", memory+key, `{"value":"a\u0000b"}`)
			if e := ts.must(t, http.StatusOK, "GET", memory+key, ""); e["key"] != key || e["value"] != "a\x00b" {
				t.Errorf("GET %s = %v, want key %q and the value as sent", key, e, key)
			}
		}
	})
}
