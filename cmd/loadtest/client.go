package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxReconnects bounds how often one run's stream is resumed; the
// workload's deadline bounds it too.
const maxReconnects = 1000

// client is the load generator's HTTP side.
type client struct {
	hc       *http.Client
	received atomic.Int64 // bytes read off every connection: responses as they came over the wire
}

func newClient() *client {
	c := &client{}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c.hc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn, n: &c.received}, nil
		},
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512, // every worker keeps its connection between requests
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
	return c
}

// countingConn counts the bytes read from a connection into n: headers,
// chunk framing and bodies, as they crossed the wire.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// close drops the idle connections, so a stopped server leaves nothing.
func (c *client) close() { c.hc.CloseIdleConnections() }

// createSession creates a session of the echo agent on the server at
// base and returns its id.
func (c *client) createSession(ctx context.Context, base string) (string, error) {
	return c.createSessionOf(ctx, base, "echo")
}

// createSessionOf creates a session of agent on the server at base and
// returns its id.
func (c *client) createSessionOf(ctx context.Context, base, agent string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/sessions", strings.NewReader(`{"agent":"`+agent+`"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = res.Body.Close() }() // read to the end or abandoned: nothing to report
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /sessions = %d: %s", res.StatusCode, body)
	}
	var s struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.ID == "" {
		return "", fmt.Errorf("POST /sessions: no id in %s", body)
	}
	return s.ID, nil
}

// runStream is what the client saw of one run's events, over its inline
// stream and every stream it resumed on.
type runStream struct {
	start      time.Time     // the POST was sent
	firstToken time.Duration // from start to the first assistant token
	elapsed    time.Duration // from start to RUN_FINISHED or RUN_ERROR
	tokens     int           // the assistant's tokens, counted from its text (see wordCounter)
	frames     int           // the assistant TEXT_MESSAGE_CONTENT frames that carried them
	inline     int           // how many tokens came on the inline stream
	dropped    int           // streams that ended before the run's end
	reconnects int           // GET /sessions/{id}/events with Last-Event-ID
	gaps, dups int           // seq jumps and repeats across all of them

	lastSeq     int64
	inAssistant bool // between an assistant TEXT_MESSAGE_START and its END
	words       wordCounter
	ended       bool
	runError    []byte // RUN_ERROR's data, when the run failed
}

// streamRun starts a run with input on session id and reads its inline
// stream (POST /sessions/{id}/run, Accept: text/event-stream) to the run's
// end. A stream that ends before RUN_FINISHED or RUN_ERROR counts as
// dropped, and the run is followed on the session's event stream from the
// last seq seen, as a browser's EventSource would, until it ends.
func (c *client) streamRun(ctx context.Context, base, id, input string) (*runStream, error) {
	body, err := json.Marshal(map[string]string{"input": input})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/sessions/"+id+"/run", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	rs := &runStream{start: time.Now()}
	if err := rs.read(c.hc, req, true); err != nil {
		return rs, fmt.Errorf("run on session %s: %w", id, err)
	}
	rs.inline = rs.tokens
	for !rs.ended {
		rs.dropped++
		if rs.reconnects == maxReconnects {
			return rs, fmt.Errorf("run on session %s: still not ended after %d reconnects", id, maxReconnects)
		}
		rs.reconnects++
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sessions/"+id+"/events", nil)
		if err != nil {
			return rs, err
		}
		req.Header.Set("Accept", "text/event-stream")
		if rs.lastSeq > 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(rs.lastSeq, 10))
		}
		if err := rs.read(c.hc, req, false); err != nil {
			return rs, fmt.Errorf("resume session %s after seq %d: %w", id, rs.lastSeq, err)
		}
	}
	if rs.runError != nil {
		return rs, fmt.Errorf("run on session %s failed: %s", id, rs.runError)
	}
	return rs, nil
}

// read sends req and reads its SSE response until the run ends or the
// stream does. A stream cut short is not an error (the caller resumes);
// an answer other than 200, or the request's context ending, is. The run's
// inline stream ends by itself after the run's end, so it is read to its
// end and its connection reused; the session's stream stays open and is
// closed instead.
func (rs *runStream) read(hc *http.Client, req *http.Request, inline bool) error {
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }() // read to the end or abandoned: nothing to report
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return fmt.Errorf("%s %s = %d: %s", req.Method, req.URL.Path, res.StatusCode, b)
	}
	fr := newFrameReader(res.Body)
	var f frame
	for !rs.ended {
		if err := fr.next(&f); err != nil {
			return req.Context().Err() // cut short, unless the deadline cut it
		}
		rs.observe(&f)
	}
	if inline {
		_, _ = io.Copy(io.Discard, res.Body)
	}
	return nil
}

// observe accounts for one frame. The user's input is echoed as a
// TEXT_MESSAGE too, so only CONTENT inside an assistant message counts as
// a token.
func (rs *runStream) observe(f *frame) {
	if f.hasID {
		switch {
		case rs.lastSeq != 0 && f.id <= rs.lastSeq:
			rs.dups++
			return
		case rs.lastSeq != 0 && f.id > rs.lastSeq+1:
			rs.gaps++
		}
		rs.lastSeq = f.id
	}
	switch string(f.event) {
	case "TEXT_MESSAGE_START":
		rs.inAssistant = bytes.Contains(f.data, []byte(`"role":"assistant"`))
		rs.words = wordCounter{}
	case "TEXT_MESSAGE_END":
		rs.inAssistant = false
	case "TEXT_MESSAGE_CONTENT":
		if !rs.inAssistant {
			return
		}
		if rs.frames == 0 {
			rs.firstToken = time.Since(rs.start)
		}
		rs.frames++
		rs.tokens += rs.words.add(f.data)
	case "RUN_FINISHED":
		rs.end()
	case "RUN_ERROR":
		rs.runError = bytes.Clone(f.data)
		rs.end()
	}
}

func (rs *runStream) end() {
	rs.ended = true
	rs.elapsed = time.Since(rs.start)
}
