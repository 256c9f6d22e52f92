package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// tabsResult is what the tabs scenario reports.
type tabsResult struct {
	IDs      []string   `json:"ids"`      // the session each tab opened
	Sidebars [][]string `json:"sidebars"` // each tab's sidebar once the API's runs waited: "title|status|badges"
	Answers  [][]string `json:"answers"`  // each tab's conversation after its Send
	After    [][]string `json:"after"`    // the other tabs' sidebars after the feed's reader closed
	Errors   []string   `json:"errors"`   // what the other tabs threw
	Takeover []string   `json:"takeover"` // the feed requests after the reader closed
	Feeds    []string   `json:"feeds"`
}

// TestConsole_Tabs: five tabs at the console, each with a session of its
// own open (over HTTP/1.1 a browser opens six connections to an origin,
// which a feed and a stream per tab would take). Runs started through
// the API, as with curl, show live in every tab's sidebar (titled,
// waiting for approval, unread) and inbox count, and in the conversation
// of the tab that shows their session; Send works in every tab at once;
// the tab reading the feed for the others closes, another resumes it
// with Last-Event-ID, and every tab still follows. The feed a client
// reads meanwhile has each change once, in order, and every session's
// log and the snapshot stream the console starts from pass the AG-UI
// verifier. KERNELD_SCREENSHOTS=DIR keeps the pictures of two tabs.
func TestConsole_Tabs(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	feed := watchFeed(t, k)
	shots := os.Getenv("KERNELD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	ids := map[string]string{}
	raw := b.playSteps(t, k, "tabs", func(step string) {
		switch {
		case strings.HasPrefix(step, "runs "):
			ids["lisbon"] = startRun(t, k, "gated", "Plan the trip to Lisbon")
			ids["notes"] = startRun(t, k, "gated", "Sort the release notes")
			call(t, k, http.MethodPost, "/sessions/"+strings.TrimPrefix(step, "runs ")+"/run", map[string]any{"input": "from curl"})
		case step == "more":
			ids["porto"] = startRun(t, k, "gated", "Book the hotel in Porto")
		}
	}, "SHOTS="+shots)
	var res tabsResult
	if err := json.Unmarshal(raw.Raw, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s/tab0.png, tab3.png, takeover.png", shots)

	for _, e := range res.Errors {
		t.Errorf("a tab threw: %s", e)
	}
	if len(res.Sidebars) != 5 || len(res.Answers) != 5 || len(res.After) != 4 {
		t.Fatalf("tabs reported %d sidebars, %d conversations, %d sidebars after the take-over; want 5, 5, 4",
			len(res.Sidebars), len(res.Answers), len(res.After))
	}
	for i, rows := range res.Sidebars {
		for _, want := range []string{
			"Plan the trip to Lisbon|waiting_input|1 waiting_input 2 to approve",
			"Sort the release notes|waiting_input|1 waiting_input 2 to approve",
		} {
			if !slices.Contains(rows, want) {
				t.Errorf("tab %d's sidebar lacks %q:\n\t%s", i, want, strings.Join(rows, "\n\t"))
			}
		}
	}
	for i, msgs := range res.Answers {
		want := []string{"user: hello from tab " + strconv.Itoa(i), "assistant: hello from tab " + strconv.Itoa(i)}
		if i == 2 {
			want = append([]string{"user: from curl", "assistant: from curl"}, want...)
		}
		equal(t, fmt.Sprintf("tab %d's conversation", i), msgs, want)
	}
	for i, rows := range res.After {
		if !slices.Contains(rows, "Book the hotel in Porto|waiting_input|1 waiting_input 2 to approve") {
			t.Errorf("tab %d's sidebar after the take-over lacks the Porto session:\n\t%s", i+1, strings.Join(rows, "\n\t"))
		}
	}
	// One feed request for all five tabs, then one that resumes it, from
	// the tab that took over.
	if n := strings.Count(strings.Join(res.Feeds, " "), "snapshot"); n != 1 {
		t.Errorf("feed requests %q, want one snapshot for every tab", res.Feeds)
	}
	if len(res.Takeover) != 1 || res.Takeover[0] == "snapshot" || res.Takeover[0] == "" {
		t.Errorf("feed requests after the reader closed %q, want one, resuming with a Last-Event-ID", res.Takeover)
	}

	approveAll(t, k)
	sessions := append(slices.Clone(res.IDs), ids["lisbon"], ids["notes"], ids["porto"])
	waitAllIdle(t, k, sessions)
	feed.check(t, sessions)
	var logs [][][]byte
	for _, id := range sessions {
		logs = append(logs, asBytes(eventLog(t, k, id)), snapshotStream(t, k, id))
	}
	aguitest.VerifyJSONLogs(t, logs)
}

// approveAll approves every call waiting in the tenant, as a script would.
func approveAll(t *testing.T, k *kerneld) {
	t.Helper()
	for _, it := range call(t, k, http.MethodGet, "/approvals?state=pending&limit=200", nil)["data"].([]any) {
		a := it.(map[string]any)
		call(t, k, http.MethodPost, fmt.Sprintf("/sessions/%s/runs/%s/approvals/%s", a["session_id"], a["run_id"], a["tool_call_id"]),
			map[string]any{"decision": "approve"})
	}
}

// waitAllIdle waits until no session of ids has a run.
func waitAllIdle(t *testing.T, k *kerneld, ids []string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, id := range ids {
		for {
			s := call(t, k, http.MethodGet, "/sessions/"+id, nil)
			if s["status"] == "idle" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s is still %v", id, s["status"])
			}
			time.Sleep(20 * time.Millisecond) // a poll with a deadline
		}
	}
}

// eventLog is session id's whole log, read as JSON pages.
func eventLog(t *testing.T, k *kerneld, id string) []json.RawMessage {
	t.Helper()
	var all []json.RawMessage
	for after := int64(0); ; {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, k.url+"/sessions/"+id+"/events?limit=1000&after="+strconv.FormatInt(after, 10), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Data      []json.RawMessage `json:"data"`
			NextAfter int64             `json:"next_after"`
		}
		err = json.NewDecoder(res.Body).Decode(&page)
		_ = res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Data...)
		if len(page.Data) < 1000 {
			return all
		}
		after = page.NextAfter
	}
}

func asBytes(raw []json.RawMessage) [][]byte {
	out := make([][]byte, len(raw))
	for i, r := range raw {
		out[i] = r
	}
	return out
}

// snapshotStream reads the stream the console starts an idle session's
// view from (?snapshot=messages) up to the end of the run that carries
// the snapshot.
func snapshotStream(t *testing.T, k *kerneld, id string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url+"/sessions/"+id+"/events?snapshot=messages", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var out [][]byte
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		out = append(out, []byte(data))
		var ev struct {
			Type     string `json:"type"`
			Metadata struct {
				Kerneld struct {
					Snapshot bool `json:"snapshot"`
				} `json:"kerneld"`
			} `json:"metadata"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "RUN_FINISHED" && ev.Metadata.Kerneld.Snapshot {
			return out
		}
	}
	t.Fatalf("the snapshot stream of %s ended before its run: %v\n%s", id, sc.Err(), out)
	return nil
}

// feedWatch is a client of the session feed for the length of a test,
// as a chat product's backend would read it.
type feedWatch struct {
	mu     sync.Mutex
	frames []feedFrame
	done   chan struct{}
}

type feedFrame struct {
	ID      int64
	Type    string
	Session string
}

// watchFeed reads k's feed from a snapshot until the test ends.
func watchFeed(t *testing.T, k *kerneld) *feedWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url+"/sessions/events?snapshot=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /sessions/events: %v %v", res, err)
	}
	w := &feedWatch{done: make(chan struct{})}
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	go w.read(res)
	return w
}

func (w *feedWatch) read(res *http.Response) {
	defer close(w.done)
	defer func() { _ = res.Body.Close() }()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	var id int64
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, _ = strconv.ParseInt(v, 10, 64)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Session struct {
				ID string `json:"id"`
			} `json:"session"`
		}
		_ = json.Unmarshal([]byte(data), &ev) // a frame that is not JSON fails check below
		w.mu.Lock()
		w.frames = append(w.frames, feedFrame{ID: id, Type: ev.Type, Session: ev.Session.ID})
		w.mu.Unlock()
	}
}

// check waits until the feed has told of every run's end in sessions,
// and checks that it told each change once, in order: the snapshot
// first, ids going up, each session created once and its runs ended.
func (w *feedWatch) check(t *testing.T, sessions []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		frames := slices.Clone(w.frames)
		w.mu.Unlock()
		missing := w.missing(frames, sessions)
		if missing == "" {
			w.inOrder(t, frames)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feed never told %s; it told:\n%v", missing, frames)
		}
		time.Sleep(20 * time.Millisecond) // a poll with a deadline
	}
}

// missing names a change to sessions that frames lack, or "".
func (w *feedWatch) missing(frames []feedFrame, sessions []string) string {
	for _, id := range sessions {
		created, ended := 0, 0
		for _, f := range frames {
			if f.Session != id {
				continue
			}
			switch f.Type {
			case "session.created":
				created++
			case "run.ended":
				ended++
			}
		}
		if created == 0 || ended == 0 {
			return "the creation and a run's end of " + id
		}
	}
	return ""
}

func (w *feedWatch) inOrder(t *testing.T, frames []feedFrame) {
	t.Helper()
	if len(frames) == 0 || frames[0].Type != "snapshot" {
		t.Fatalf("the feed started with %v, want a snapshot", frames[:min(len(frames), 1)])
	}
	created := map[string]int{}
	for i, f := range frames[1:] {
		if f.ID <= frames[i].ID {
			t.Errorf("feed frame %d has id %d after %d", i+1, f.ID, frames[i].ID)
		}
		if f.Type == "" || f.Session == "" {
			t.Errorf("feed frame %d = %+v, want a change to a session", i+1, f)
		}
		if f.Type == "session.created" {
			created[f.Session]++
		}
	}
	for id, n := range created {
		if n != 1 {
			t.Errorf("the feed told of %s's creation %d times", id, n)
		}
	}
}
