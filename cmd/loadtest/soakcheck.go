package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// How far the idle server after the load may be from its idle baseline
// after the warm-up. Goroutines and descriptors must come back almost
// exactly; the Go runtime hands memory back to the OS only over minutes,
// so the resident set gets room for a heap that has not shrunk yet.
const (
	goroutineSlack = 10
	fdSlack        = 5
	rssSlack       = 64 << 20
)

// maxProblems bounds the problems kept word for word; all are counted.
const maxProblems = 20

// soakStats counts what the soak's clients did and saw. It is safe for
// concurrent use.
type soakStats struct {
	conversations, cancels, busy      atomic.Int64 // scenarios
	runs, reads, subscriptions        atomic.Int64
	resumes, frames, fiveXX, requests atomic.Int64

	mu       sync.Mutex
	statuses map[int]int64
	problems []string
	failures int64
}

// status counts one answer.
func (s *soakStats) status(code int) {
	s.requests.Add(1)
	if code >= 500 {
		s.fiveXX.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statuses == nil {
		s.statuses = map[int]int64{}
	}
	s.statuses[code]++
}

// fail records a problem.
func (s *soakStats) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	if len(s.problems) < maxProblems {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

// sample is the idle server's use of the machine.
type sample struct {
	rss        int64 // bytes, from /proc/PID/status
	goroutines int64 // go_goroutines, from /metrics
	fds        int64 // process_open_fds, from /metrics
}

// sampleServer reads srv's resident set from /proc and its goroutines and
// open descriptors from /metrics.
func sampleServer(ctx context.Context, hc *http.Client, srv *server) (sample, error) {
	var s sample
	var err error
	if s.rss, _, err = srv.memory(); err != nil {
		return s, err
	}
	res, err := httpGet(ctx, hc, srv.url+"/metrics")
	if err != nil {
		return s, err
	}
	defer func() { _ = res.Body.Close() }() // read to the end
	if res.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET /metrics = %d", res.StatusCode)
	}
	vals, err := gauges(res.Body, "go_goroutines", "process_open_fds")
	s.goroutines, s.fds = vals[0], vals[1]
	return s, err
}

// gauges reads the values of the named unlabelled series from a
// Prometheus text exposition.
func gauges(r io.Reader, names ...string) ([]int64, error) {
	out := make([]int64, len(names))
	found := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for i, n := range names {
			if name == n {
				v, err := strconv.ParseFloat(value, 64)
				if err != nil {
					return out, fmt.Errorf("/metrics %s: %q", n, value)
				}
				out[i] = int64(v)
				found++
			}
		}
	}
	if found != len(names) {
		return out, fmt.Errorf("/metrics lacks one of %v", names)
	}
	return out, sc.Err()
}

// settle waits for the server to hold no session (each scenario deletes
// its own) and, while any remains, checks no run is left unfinished:
// either is a problem once settleTimeout has passed.
func settle(ctx context.Context, cl *client, base string) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for {
		left, err := sessionsLeft(ctx, cl.hc, base)
		if err == nil && left == 0 {
			return nil
		}
		if sleepCtx(ctx, 100*time.Millisecond) != nil {
			return errors.Join(fmt.Errorf("%d sessions left %s after the load", left, settleTimeout), err)
		}
	}
}

// sessionsLeft counts the sessions the server lists, up to a page.
func sessionsLeft(ctx context.Context, hc *http.Client, base string) (int, error) {
	res, err := httpGet(ctx, hc, base+"/sessions?limit=100")
	if err != nil {
		return -1, err
	}
	defer func() { _ = res.Body.Close() }() // read to the end
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return -1, fmt.Errorf("GET /sessions: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return -1, fmt.Errorf("GET /sessions = %d: %s", res.StatusCode, b)
	}
	return strings.Count(string(b), `"agent":`), nil
}

// soakReport is the soak's outcome.
type soakReport struct {
	opts      soakOptions
	stats     soakStats
	peakRSS   atomic.Int64
	elapsed   time.Duration
	base, end sample
	problems  []string
}

func (r *soakReport) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// check turns what the clients saw and what the server kept into
// problems.
func (r *soakReport) check() {
	s := &r.stats
	if s.failures > 0 {
		r.problem("%d client-side failures (5xx, wrong statuses, seq gaps or duplicates, stuck runs); the first:\n  %s",
			s.failures, strings.Join(s.problems, "\n  "))
	}
	if n := s.fiveXX.Load(); n > 0 {
		r.problem("%d answers were 5xx", n)
	}
	if r.end.goroutines > r.base.goroutines+goroutineSlack {
		r.problem("goroutines %d after the load, %d before", r.end.goroutines, r.base.goroutines)
	}
	if r.end.fds > r.base.fds+fdSlack {
		r.problem("open descriptors %d after the load, %d before", r.end.fds, r.base.fds)
	}
	if r.end.rss > r.base.rss+rssSlack {
		r.problem("resident set %s after the load, %s before", formatBytes(float64(r.end.rss)), formatBytes(float64(r.base.rss)))
	}
}

// write prints the report as a Markdown table, then the problems.
func (r *soakReport) write(w io.Writer) {
	s := &r.stats
	rows := [][2]string{
		{"store, workers", fmt.Sprintf("%s, %d", r.opts.store, r.opts.workers)},
		{"load", r.elapsed.Round(time.Second).String()},
		{"scenarios: conversation / cancel / busy", fmt.Sprintf("%d / %d / %d", s.conversations.Load(), s.cancels.Load(), s.busy.Load())},
		{"runs ended", thousands(s.runs.Load())},
		{"requests (statuses)", fmt.Sprintf("%s (%s)", thousands(s.requests.Load()), r.statusList())},
		{"stream reads / resumes / subscriptions", fmt.Sprintf("%s / %s / %s", thousands(s.reads.Load()), thousands(s.resumes.Load()), thousands(s.subscriptions.Load()))},
		{"events read", thousands(s.frames.Load())},
		{"5xx / client failures", fmt.Sprintf("%d / %d", s.fiveXX.Load(), s.failures)},
		{"idle RSS before → after (peak under load)", fmt.Sprintf("%s → %s (%s)", formatBytes(float64(r.base.rss)), formatBytes(float64(r.end.rss)), formatBytes(float64(r.peakRSS.Load())))},
		{"idle goroutines before → after", fmt.Sprintf("%d → %d", r.base.goroutines, r.end.goroutines)},
		{"idle open descriptors before → after", fmt.Sprintf("%d → %d", r.base.fds, r.end.fds)},
	}
	_, _ = fmt.Fprintln(w, "| soak | |\n|---|---|")
	for _, row := range rows {
		_, _ = fmt.Fprintf(w, "| %s | %s |\n", row[0], row[1])
	}
	if len(r.problems) == 0 {
		_, _ = fmt.Fprintln(w, "\nno problems")
		return
	}
	_, _ = fmt.Fprintln(w, "\nproblems:")
	for _, p := range r.problems {
		_, _ = fmt.Fprintln(w, "- "+p)
	}
}

// statusList lists the statuses seen with their counts, in order.
func (r *soakReport) statusList() string {
	s := &r.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for code := 100; code < 600; code++ {
		if n := s.statuses[code]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d: %s", code, thousands(n)))
		}
	}
	return strings.Join(parts, ", ")
}
