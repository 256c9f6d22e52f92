package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// subscriberLag is W5: how far a subscriber of a session trails the run's
// own stream. Each run is posted, with its inline stream, to the replica
// that then holds the session's lease and appends its events; a second
// stream follows the session (GET /events) on the next replica, which
// learns of each event from Redis. Both are read by this process, so the
// difference between the arrival of one seq on the two streams is the
// subscriber's lag behind the owner's delivery, with no clocks to align.
// With one replica both streams are on it, and the lag is its fan-out's.
func subscriberLag(ctx context.Context, e *env) error {
	n := e.sz.lagRuns
	ids := make([]string, n)
	err := inFlight(ctx, n, e.sz.inFlight, func(i int) (err error) {
		ids[i], err = e.cl.createSessionOf(ctx, e.srv.url(i), "paced")
		return err
	})
	if err != nil {
		return err
	}
	var lag latencies
	err = inFlight(ctx, n, n, func(i int) error {
		d, err := e.cl.lagOfOneRun(ctx, e.srv.url(i), e.srv.url(i+1), ids[i], words(e.sz.lagTokens, uint64(i)))
		if err != nil {
			return fmt.Errorf("session %s: %w", ids[i], err)
		}
		for _, x := range d {
			lag.add(x)
		}
		return nil
	})
	if err != nil {
		return err
	}
	d := lag.sorted()
	e.rec("W5 subscriber lag p50", kindDuration, float64(percentile(d, 50)))
	e.rec("W5 subscriber lag p99", kindDuration, float64(percentile(d, 99)))
	return nil
}

// lagOfOneRun follows session id on subscriberBase, then streams a run of
// input from ownerBase, and returns, for every event both streams carried,
// how much later the subscriber read it (negative when it was first).
func (c *client) lagOfOneRun(ctx context.Context, ownerBase, subscriberBase, id, input string) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the subscriber's stream, which never ends by itself
	sub, err := c.open(ctx, http.MethodGet, subscriberBase+"/sessions/"+id+"/events", "")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	subscribed := make(chan arrivals, 1)
	go func() {
		defer func() { _ = sub.Close() }() // cancel closes it mid-read
		subscribed <- readArrivals(sub, start)
	}()
	body, err := json.Marshal(map[string]string{"input": input})
	if err != nil {
		return nil, err
	}
	run, err := c.open(ctx, http.MethodPost, ownerBase+"/sessions/"+id+"/run", string(body))
	if err != nil {
		return nil, err
	}
	owned := readArrivals(run, start)
	_ = run.Close()
	if !owned.ended {
		return nil, errors.New("the run's inline stream ended before the run")
	}
	var followed arrivals
	select {
	case followed = <-subscribed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !followed.ended {
		return nil, errors.New("the subscriber's stream ended before the run")
	}
	var out []time.Duration
	for seq, t := range owned.at {
		if s, ok := followed.at[seq]; ok {
			out = append(out, s-t)
		}
	}
	if len(out) != len(owned.at) {
		return nil, fmt.Errorf("the subscriber read %d of the run's %d events", len(out), len(owned.at))
	}
	return out, nil
}

// open sends a request for an event stream and returns its body once the
// response's headers are in: kerneld sends them, and a retry line, as soon
// as the stream is open, before any event.
func (c *client) open(ctx context.Context, method, url, body string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		_ = res.Body.Close()
		return nil, fmt.Errorf("%s %s = %d: %s", method, req.URL.Path, res.StatusCode, b)
	}
	return res.Body, nil
}

// arrivals is when each seq of a stream was read, from a common start,
// up to the run's end.
type arrivals struct {
	at    map[int64]time.Duration
	ended bool
}

// readArrivals reads frames until RUN_FINISHED or RUN_ERROR, or the end of
// the stream.
func readArrivals(r io.Reader, start time.Time) arrivals {
	a := arrivals{at: make(map[int64]time.Duration)}
	fr := newFrameReader(r)
	var f frame
	for fr.next(&f) == nil {
		if f.hasID {
			a.at[f.id] = time.Since(start)
		}
		if ev := string(f.event); ev == "RUN_FINISHED" || ev == "RUN_ERROR" {
			a.ended = true
			return a
		}
	}
	return a
}
