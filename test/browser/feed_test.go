package browser

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
)

// call makes one API request as curl would, and decodes its answer.
func call(t *testing.T, k *kerneld, method, path string, body any) map[string]any {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, k.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		t.Fatalf("%s %s: %s\n%s", method, path, res.Status, b)
	}
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: decode: %v\n%s", method, path, err, b)
		}
	}
	return out
}

// startRun creates a session of agent over HTTP and starts a run in it
// with input, as a script with curl would; it returns the session's id.
func startRun(t *testing.T, k *kerneld, agent, input string) string {
	t.Helper()
	id := call(t, k, http.MethodPost, "/sessions", map[string]any{"agent": agent})["id"].(string)
	call(t, k, http.MethodPost, "/sessions/"+id+"/run", map[string]any{"input": input})
	return id
}

// feedResult is what the sidebar scenario reports.
type feedResult struct {
	result
	Waiting, OtherWaiting []string // each tab's sidebar while the runs waited: "title|status|badges"
	InboxCount            string   // the other tab's inbox count then
	Inbox                 []string // the inbox's cards: "session title|tool"
	Idle, OtherIdle       []string // each tab's sidebar once every approval was decided
	Read, OtherRead       []string // each tab's sidebar once one tab opened the Lisbon session
	Feeds                 []string // where each feed request started: "snapshot" or a Last-Event-ID
}

// TestConsole_SidebarFeed: two tabs at the console; runs started through
// the API (as curl would) appear in both sidebars live, titled, waiting
// for approval, unread, and in the inbox count; one tab decides them all
// from the inbox (approve, deny with a reason, always), and both
// sidebars follow, through a dropped connection resumed with
// Last-Event-ID; opening a session in one tab clears its unread badge in
// both. The tabs share one feed, which one of them reads.
func TestConsole_SidebarFeed(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	ids := map[string]string{}
	var res feedResult
	res.result = b.playSteps(t, k, "feed", func(step string) {
		switch step {
		case "runs":
			ids["lisbon"] = startRun(t, k, "gated", "Plan the trip to Lisbon")
			ids["notes"] = startRun(t, k, "gated", "Sort the release notes")
		case "drop":
			k.server.CloseClientConnections()
		}
	})
	if err := json.Unmarshal(res.Raw, &res); err != nil {
		t.Fatal(err)
	}

	// The sidebar's order follows the sessions' activity, which the two
	// runs interleave: compare the rows, sorted.
	sorted := func(rows []string) []string { return slices.Sorted(slices.Values(rows)) }
	wantWaiting := []string{
		"Plan the trip to Lisbon|waiting_input|1 waiting_input 2 to approve",
		"Sort the release notes|waiting_input|1 waiting_input 2 to approve",
	}
	equal(t, "sidebar while the runs wait", sorted(res.Waiting), wantWaiting)
	equal(t, "the other tab's sidebar while the runs wait", sorted(res.OtherWaiting), wantWaiting)
	if res.InboxCount != "4" {
		t.Errorf("the other tab's inbox count = %q, want 4", res.InboxCount)
	}
	equal(t, "inbox", sorted(res.Inbox), []string{
		"Plan the trip to Lisbon|memory_set", "Plan the trip to Lisbon|memory_set",
		"Sort the release notes|memory_set", "Sort the release notes|memory_set",
	})
	wantIdle := []string{"Plan the trip to Lisbon|idle|2 idle", "Sort the release notes|idle|2 idle"}
	equal(t, "sidebar once decided", sorted(res.Idle), wantIdle)
	equal(t, "the other tab's sidebar once decided", sorted(res.OtherIdle), wantIdle)
	wantRead := []string{"Plan the trip to Lisbon|idle|idle", "Sort the release notes|idle|2 idle"}
	equal(t, "sidebar after opening the Lisbon session", sorted(res.Read), wantRead)
	equal(t, "the other tab's sidebar after the Lisbon session was opened", sorted(res.OtherRead), wantRead)
	// The two tabs share one feed: one of them reads it for both, from a
	// snapshot, and resumes it after the drop with a Last-Event-ID.
	if len(res.Feeds) < 2 || res.Feeds[0] != "snapshot" || slices.Contains(res.Feeds[1:], "snapshot") {
		t.Errorf("feed requests %q, want one snapshot for both tabs, then resumes", res.Feeds)
	}
	if len(res.Feeds) >= 2 && (res.Feeds[1] == "" || res.Feeds[1] == "0") {
		t.Errorf("feed requests %q, want the feed to resume with a Last-Event-ID after the drop", res.Feeds)
	}

	ctx := tenantContext(t)
	decided := func(id string, withReason bool) []string {
		runs, err := k.kernel.ListRuns(ctx, id, kernel.PageRequest{Limit: 10})
		if err != nil || len(runs.Items) != 1 {
			t.Fatalf("runs of %s = %+v, %v; want one", id, runs, err)
		}
		approvals, err := k.kernel.Approvals(ctx, id, runs.Items[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range approvals {
			if withReason {
				out = append(out, strings.TrimSpace(a.State+" "+a.Reason))
			} else {
				out = append(out, a.State)
			}
		}
		slices.Sort(out) // the inbox lists calls asked together in any order
		return out
	}
	equal(t, "the Lisbon session's approvals", decided(ids["lisbon"], true), []string{"approved", "denied not now"})
	// Always on the first call approved the second, pending beside it, too.
	equal(t, "the release notes session's approvals", decided(ids["notes"], false), []string{"approved", "approved"})
	notes, err := k.kernel.GetSession(ctx, ids["notes"])
	if err != nil {
		t.Fatal(err)
	}
	if len(notes.Grants) != 1 || notes.Grants[0].Tool != "memory_set" {
		t.Errorf("the release notes session's standing approvals = %+v, want memory_set, from Always", notes.Grants)
	}
}

// TestConsole_Settings: a session's title and permission mode set from
// its settings reach kerneld and the sidebar; Always on one approval
// approves the call beside it and the next run's calls, each with a note
// saying why it ran without asking.
func TestConsole_Settings(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	res := b.play(t, k, "settings")
	var got struct {
		Modes []string `json:"modes"`
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal(res.Raw, &got); err != nil {
		t.Fatal(err)
	}

	equal(t, "the permission modes offered", got.Modes, []string{"ask", "read_only_auto"})
	s, err := k.kernel.GetSession(tenantContext(t), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Title != "My saved settings" || s.PermissionMode != "read_only_auto" {
		t.Errorf("session title %q, permission mode %q; want the settings saved", s.Title, s.PermissionMode)
	}
	if len(got.Notes) != 2 {
		t.Fatalf("notes %q, want one per call of the second run", got.Notes)
	}
	for _, n := range got.Notes {
		if !strings.HasPrefix(n, "memory_set ran without asking: approved always in this session") {
			t.Errorf("note %q, want it to say the standing approval let the call run", n)
		}
	}
	equal(t, "conversation", kinds(res.Transcript), []string{
		"message", "message", "tool memory_set done", "tool memory_set done", "approval", "approval", "message",
		"message", "message", "tool memory_set done", "tool memory_set done", "note", "note", "message",
	})
}

// TestConsole_Instructions: a session's instructions set from its
// settings reach kerneld.
func TestConsole_Instructions(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	res := b.play(t, k, "instructions")

	s, err := k.kernel.GetSession(tenantContext(t), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Instructions != "Answer in French." {
		t.Errorf("session instructions %q, want those saved in the settings", s.Instructions)
	}
}

// TestConsole_Clear: Clear conversation in a session's settings empties
// it in place; the tab that cleared it and another tab showing it reset
// their views from the session's events, without reading the session
// again, and both go on with the next run. The console's runs say they
// came from the console.
func TestConsole_Clear(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	res := b.play(t, k, "clear")
	var got struct {
		Cleared      []item `json:"cleared"`
		OtherCleared []item `json:"otherCleared"`
	}
	if err := json.Unmarshal(res.Raw, &got); err != nil {
		t.Fatal(err)
	}
	for name, items := range map[string][]item{"this tab": got.Cleared, "the other tab": got.OtherCleared} {
		equal(t, name+" once cleared", kinds(items), []string{"note"})
		if len(items) == 1 && !strings.Contains(items[0].Text, "cleared") {
			t.Errorf("%s's note %q does not say the conversation was cleared", name, items[0].Text)
		}
	}
	for name, items := range map[string][]item{"this tab": res.Transcript, "the other tab": res.Other} {
		equal(t, name+" after the next run", kinds(items), []string{"note", "message", "message"})
	}
	snapshots := 0
	for _, q := range res.Streams {
		if strings.Contains(q, "snapshot=messages") {
			snapshots++
		}
	}
	if snapshots != 2 {
		t.Errorf("event stream requests %q: want one snapshot per tab, and the clear drawn from the events", res.Streams)
	}

	ctx := tenantContext(t)
	page, err := k.kernel.Messages(ctx, res.ID, kernel.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range page.Items {
		roles = append(roles, string(m.Role))
	}
	equal(t, "the history kerneld shows", roles, []string{"compaction", "user", "assistant"})
	runs, err := k.kernel.ListRuns(ctx, res.ID, kernel.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, r := range runs.Items {
		sources = append(sources, r.Kind+":"+r.Source)
	}
	equal(t, "the runs, newest first, as kind:source", sources, []string{":console", "clear:", ":console"})
}
