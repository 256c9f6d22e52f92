package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// scenarioTimeout bounds one scenario: the load's end stops new ones, not
// those under way, so that none leaves a session behind.
const scenarioTimeout = 2 * time.Minute

// soaker runs the soak's scenarios against the server at base.
type soaker struct {
	cl    *client
	base  string
	stats *soakStats
	srv   *server       // sampled for peak RSS when set
	peak  *atomic.Int64 // the peak RSS seen, in bytes
}

// runLoad runs workers goroutines of scenarios for d, then waits for the
// scenarios under way to finish.
func runLoad(ctx context.Context, d time.Duration, workers int, s *soaker) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				s.scenario(ctx, rng)
			}
		})
	}
	if s.srv != nil {
		wg.Go(func() { s.watchRSS(ctx, deadline) })
	}
	wg.Wait()
}

// scenario runs one scenario, picked at random, on a session of its own,
// and deletes the session.
func (s *soaker) scenario(ctx context.Context, rng *rand.Rand) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scenarioTimeout)
	defer cancel()
	id, err := s.createSession(ctx)
	if err != nil {
		return // counted
	}
	input := words(20+rng.IntN(120), rng.Uint64())
	wait := func() {}
	switch p := rng.IntN(10); {
	case p < 5:
		s.stats.conversations.Add(1)
		wait = s.converse(ctx, rng, id, input)
	case p < 7:
		s.stats.cancels.Add(1)
		s.cancelMidRun(ctx, rng, id, input)
	default:
		s.stats.busy.Add(1)
		s.postWhileBusy(ctx, id, input)
	}
	s.awaitRuns(ctx, id) // none may be left unfinished
	s.call(ctx, http.MethodDelete, "/sessions/"+id, "", nil, http.StatusNoContent)
	wait()
}

// converse runs one to three runs on session id, each streamed inline and
// cut short at random, then resumed, while a subscriber follows the
// session with reconnects of its own. It returns a function that waits
// for the subscriber, which ends once the session is deleted.
func (s *soaker) converse(ctx context.Context, rng *rand.Rand, id, input string) (wait func()) {
	sub := make(chan struct{})
	subRNG := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	go func() {
		defer close(sub)
		s.subscribe(ctx, subRNG, id)
	}()
	for range 1 + rng.IntN(3) {
		s.streamRun(ctx, rng, id, input)
	}
	return func() { <-sub }
}

// streamRun posts input to session id, reads the run's inline stream for a
// random number of frames, and follows the session's stream from the last
// seq it saw until the run ends.
func (s *soaker) streamRun(ctx context.Context, rng *rand.Rand, id, input string) {
	body, _ := json.Marshal(map[string]string{"input": input}) // strings encode
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/sessions/"+id+"/run", bytes.NewReader(body))
	if err != nil {
		s.stats.fail("%v", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	// The run's events follow the session's last one: nothing is logged
	// between runs. That is where a resume starts if the inline stream
	// was cut before its first event.
	var sess struct {
		LastSeq int64 `json:"last_seq"`
	}
	if !s.call(ctx, http.MethodGet, "/sessions/"+id, "", &sess, http.StatusOK) {
		return
	}
	seqs := seqTrack{last: sess.LastSeq, started: true}
	ended, err := s.readStream(req, &seqs, 5+rng.IntN(60))
	for reads := 1; !ended && err == nil && reads < maxReconnects; reads++ {
		s.stats.resumes.Add(1)
		ended, err = s.readStream(s.eventsRequest(ctx, id, seqs.last), &seqs, 5+rng.IntN(60))
	}
	if err != nil || !ended {
		s.stats.fail("run on session %s: ended %v after seq %d: %v", id, ended, seqs.last, err)
		return
	}
	s.stats.runs.Add(1)
}

// eventsRequest is GET /sessions/{id}/events after seq after.
func (s *soaker) eventsRequest(ctx context.Context, id string, after int64) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/sessions/"+id+"/events", nil) // a valid URL
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", fmt.Sprint(after)) // 0: the whole log
	return req
}

// subscribe follows session id's stream, dropping the connection after a
// random number of frames and resuming from the last seq, until the
// session is gone (204 No Content, or 404 to the first request).
func (s *soaker) subscribe(ctx context.Context, rng *rand.Rand, id string) {
	var seqs seqTrack
	for ctx.Err() == nil {
		res, err := s.cl.hc.Do(s.eventsRequest(ctx, id, seqs.last))
		if err != nil {
			s.stats.fail("subscribe to session %s: %v", id, err)
			return
		}
		s.stats.status(res.StatusCode)
		if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusNoContent {
			_ = res.Body.Close()
			return // deleted: 204 to a resume (nothing more will come), 404 without a cursor
		}
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
			_ = res.Body.Close()
			s.stats.fail("GET /sessions/%s/events = %d: %s", id, res.StatusCode, b)
			return
		}
		s.stats.subscriptions.Add(1)
		_, err = s.readFrames(res.Body, &seqs, 5+rng.IntN(100), false)
		_ = res.Body.Close()
		if err != nil {
			s.stats.fail("session %s's stream: %v", id, err)
			return
		}
	}
}

// readStream sends req, a request for an event stream, and reads at most
// limit frames of it, or to the end of the run it carries; ended says
// whether it saw that end.
func (s *soaker) readStream(req *http.Request, seqs *seqTrack, limit int) (ended bool, err error) {
	res, err := s.cl.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer func() { _ = res.Body.Close() }() // read as far as wanted
	s.stats.status(res.StatusCode)
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return false, fmt.Errorf("%s %s = %d: %s", req.Method, req.URL.Path, res.StatusCode, b)
	}
	return s.readFrames(res.Body, seqs, limit, true)
}

// readFrames reads at most limit frames from an SSE body, checking their
// seqs; with toRunEnd it stops at a run's end and reports it. The body
// ending is no error: the caller resumes.
func (s *soaker) readFrames(body io.Reader, seqs *seqTrack, limit int, toRunEnd bool) (ended bool, err error) {
	s.stats.reads.Add(1)
	seqs.newRead()
	fr := newFrameReader(body)
	var f frame
	for n := 0; n < limit; n++ {
		if err := fr.next(&f); err != nil {
			return false, nil
		}
		if !f.hasID {
			continue
		}
		s.stats.frames.Add(1)
		if problem := seqs.see(f.id); problem != "" {
			s.stats.fail("%s", problem)
		}
		if toRunEnd && (string(f.event) == "RUN_FINISHED" || string(f.event) == "RUN_ERROR") {
			return true, nil
		}
	}
	return false, nil
}

// seqTrack checks the seqs of one client's reads of one session's log:
// within a read, and from a read resumed after the last seq to the next,
// each seq must be the last plus one.
type seqTrack struct {
	last    int64 // the last seq seen, or the cursor to start after
	started bool  // last is known: the next seq must follow it
	fresh   bool  // no frame of the current read seen yet
}

func (t *seqTrack) newRead() { t.fresh = true }

// see records seq and returns what is wrong with it, or "". Until a seq
// is known, the first may be any.
func (t *seqTrack) see(seq int64) string {
	defer func() { t.last, t.started, t.fresh = seq, true, false }()
	switch {
	case !t.started || seq == t.last+1:
		return ""
	case seq <= t.last:
		return fmt.Sprintf("duplicate: seq %d after seq %d (first of its read: %v)", seq, t.last, t.fresh)
	}
	return fmt.Sprintf("gap: seq %d after seq %d (first of its read: %v)", seq, t.last, t.fresh)
}

// cancelMidRun starts a run and cancels it a random moment later; the
// cancel must answer with the run ended, cancelled or already over.
func (s *soaker) cancelMidRun(ctx context.Context, rng *rand.Rand, id, input string) {
	var run runInfo
	if !s.call(ctx, http.MethodPost, "/sessions/"+id+"/run", runBody(input, ""), &run, http.StatusAccepted) {
		return
	}
	_ = sleepCtx(ctx, time.Duration(rng.IntN(300))*time.Millisecond)
	var got runInfo
	if !s.call(ctx, http.MethodPost, "/sessions/"+id+"/runs/"+run.ID+"/cancel", "", &got, http.StatusOK) {
		return
	}
	if got.State != "cancelled" && got.State != "succeeded" {
		s.stats.fail("cancel of run %s answered it %s", run.ID, got.State)
	}
	s.stats.runs.Add(1)
}

// postWhileBusy starts a run and posts input with every if_busy while it
// runs.
func (s *soaker) postWhileBusy(ctx context.Context, id, input string) {
	if !s.call(ctx, http.MethodPost, "/sessions/"+id+"/run", runBody(input, ""), nil, http.StatusAccepted) {
		return
	}
	s.stats.runs.Add(1)
	// reject is refused while the run is on, accepted if it just ended.
	var run runInfo
	s.call(ctx, http.MethodPost, "/sessions/"+id+"/run", runBody("again", "reject"), &run, http.StatusConflict, http.StatusAccepted)
	if run.ID != "" {
		s.stats.runs.Add(1)
	}
	for _, policy := range []string{"queue", "interrupt", "steer"} {
		if s.call(ctx, http.MethodPost, "/sessions/"+id+"/run", runBody(policy+" "+input, policy), nil, http.StatusAccepted) {
			s.stats.runs.Add(1)
		}
	}
}

// awaitRuns waits for every run of session id to end.
func (s *soaker) awaitRuns(ctx context.Context, id string) {
	for {
		var page struct{ Data []runInfo }
		if !s.call(ctx, http.MethodGet, "/sessions/"+id+"/runs?limit=100", "", &page, http.StatusOK) {
			return
		}
		open := slices.IndexFunc(page.Data, func(r runInfo) bool { return !terminal(r.State) })
		if open < 0 {
			return
		}
		if sleepCtx(ctx, 20*time.Millisecond) != nil {
			s.stats.fail("run %s of session %s still %s after %s", page.Data[open].ID, id, page.Data[open].State, scenarioTimeout)
			return
		}
	}
}

// runInfo is what the soak reads of a run.
type runInfo struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// terminal reports whether a run in state has ended.
func terminal(state string) bool {
	switch state {
	case "queued", "running", "waiting_input":
		return false
	}
	return true
}

func runBody(input, ifBusy string) string {
	m := map[string]string{"input": input}
	if ifBusy != "" {
		m["if_busy"] = ifBusy
	}
	b, _ := json.Marshal(m) // strings encode
	return string(b)
}

// createSession creates a session of the soak's agent.
func (s *soaker) createSession(ctx context.Context) (string, error) {
	var got struct{ ID string }
	if !s.call(ctx, http.MethodPost, "/sessions", `{"agent":"soaker"}`, &got, http.StatusCreated) {
		return "", errors.New("no session")
	}
	return got.ID, nil
}

// call sends a request with a JSON body, counts its status, decodes the
// answer into out if set, and reports whether the status was one of want;
// anything else is a problem.
func (s *soaker) call(ctx context.Context, method, path, body string, out any, want ...int) bool {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.stats.fail("%v", err)
		return false
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := s.cl.hc.Do(req)
	if err != nil {
		s.stats.fail("%s %s: %v", method, path, err)
		return false
	}
	defer func() { _ = res.Body.Close() }() // read to the end
	b, err := io.ReadAll(res.Body)
	s.stats.status(res.StatusCode)
	switch {
	case err != nil:
		s.stats.fail("%s %s: read the answer: %v", method, path, err)
		return false
	case !slices.Contains(want, res.StatusCode):
		s.stats.fail("%s %s = %d, want %v: %s", method, path, res.StatusCode, want, b)
		return false
	case out != nil:
		if err := json.Unmarshal(b, out); err != nil {
			s.stats.fail("%s %s: decode %s: %v", method, path, b, err)
			return false
		}
	}
	return true
}

// watchRSS samples the server's resident set every second until deadline
// and keeps the peak.
func (s *soaker) watchRSS(ctx context.Context, deadline time.Time) {
	for time.Now().Before(deadline) && sleepCtx(ctx, time.Second) == nil {
		if rss, _, err := s.srv.memory(); err == nil && rss > s.peak.Load() {
			s.peak.Store(rss)
		}
	}
}
