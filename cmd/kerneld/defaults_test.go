package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProcess_ShippedDefaultsServeABurst is an ordinary backend for 200
// users on kerneld as shipped (configs/kerneld.yaml, no API keys): one
// client creates 200 sessions at once, follows each one's stream and
// runs each. The defaults must bound abuse, not this: no request may be
// refused, with 429 or anything else, and every run must finish.
func TestProcess_ShippedDefaultsServeABurst(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const sessions = 200
	p := startShipped(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sessions}}
	t.Cleanup(client.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	start := time.Now()
	ready := make(chan struct{})
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			<-ready
			errs[i] = burstSession(ctx, client, p.base)
		})
	}
	close(ready)
	wg.Wait()
	refusals := map[string]int{}
	for _, err := range errs {
		if err != nil {
			refusals[err.Error()]++
		}
	}
	if len(refusals) > 0 {
		t.Fatalf("%d of %d sessions were refused or failed:\n%s", sessions-countNil(errs), sessions, tally(refusals))
	}
	t.Logf("%d sessions created, streamed and run to the end at once in %s", sessions, time.Since(start).Round(time.Millisecond))
}

// burstSession creates an echo session, opens its stream, runs it, and
// reads the stream to the run's end. Its error names the first request
// that was not answered as an ordinary client expects, with the problem's
// code and limit.
func burstSession(ctx context.Context, c *http.Client, base string) error {
	res, err := burstRequest(ctx, c, "POST", base+"/sessions", `{"agent":"echo"}`, "")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return refusal("POST /sessions", res)
	}
	var s struct{ ID string }
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return fmt.Errorf("POST /sessions: %w", err)
	}
	stream, err := burstRequest(ctx, c, "GET", base+"/sessions/"+s.ID+"/events", "", "text/event-stream")
	if err != nil {
		return err
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		return refusal("GET /sessions/{id}/events", stream)
	}
	run, err := burstRequest(ctx, c, "POST", base+"/sessions/"+s.ID+"/run", `{"input":"hello from one of many users"}`, "")
	if err != nil {
		return err
	}
	defer run.Body.Close()
	if run.StatusCode != http.StatusAccepted {
		return refusal("POST /sessions/{id}/run", run)
	}
	return untilRunEnds(stream.Body)
}

// burstRequest makes one request; accept, if set, is its Accept header.
func burstRequest(ctx context.Context, c *http.Client, method, url, body, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, strings.TrimPrefix(url, "http://"), err)
	}
	return res, nil
}

// refusal describes an unexpected answer by its status, code and limit.
func refusal(what string, res *http.Response) error {
	var p struct{ Code, Limit string }
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &p)
	return fmt.Errorf("%s = %d %s (limit %q)", what, res.StatusCode, p.Code, p.Limit)
}

// untilRunEnds reads an event stream until RUN_FINISHED.
func untilRunEnds(body io.Reader) error {
	r := bufio.NewReader(body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("the stream ended before the run did: %w", err)
		}
		switch strings.TrimSpace(line) {
		case "event: RUN_FINISHED":
			return nil
		case "event: RUN_ERROR":
			return fmt.Errorf("the run failed")
		}
	}
}

func countNil(errs []error) int {
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	return n
}

// tally lists messages with their counts, most frequent first.
func tally(m map[string]int) string {
	lines := make([]string, 0, len(m))
	for msg, n := range m {
		lines = append(lines, fmt.Sprintf("%4d × %s", n, msg))
	}
	sort.Sort(sort.Reverse(sort.StringSlice(lines)))
	return strings.Join(lines, "\n")
}
