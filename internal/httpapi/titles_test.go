package httpapi_test

import (
	"net/http"
	"testing"
)

func TestSessions_Titles(t *testing.T) {
	ts := newServer(t, serverOptions{})
	paris := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","title":"Trip to Paris"}`)
	if paris["title"] != "Trip to Paris" {
		t.Fatalf("title = %v, want the one given", paris["title"])
	}
	untitled := ts.createSession(t, "echo")
	if got := ts.must(t, http.StatusOK, "GET", "/sessions/"+untitled, ""); got["title"] != nil {
		t.Errorf("title = %v, want null before any", got["title"])
	}
	renamed := ts.must(t, http.StatusOK, "PATCH", "/sessions/"+untitled, `{"title":"Notes on paris"}`)
	if renamed["title"] != "Notes on paris" {
		t.Errorf("title = %v after PATCH", renamed["title"])
	}
	ts.createSession(t, "echo")

	for q, want := range map[string]int{"PARIS": 2, "trip": 1, "London": 0} {
		list := ts.must(t, http.StatusOK, "GET", "/sessions?q="+q, "")
		if got := len(list["data"].([]any)); got != want {
			t.Errorf("?q=%s listed %d sessions, want %d", q, got, want)
		}
	}
	if res := ts.do(t, "PATCH", "/sessions/"+untitled, `{"title":"a\u0000b"}`); res.status != http.StatusBadRequest {
		t.Errorf("a title with NUL: status %d, want 400", res.status)
	}
}
