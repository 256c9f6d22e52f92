// Package client is the Go client of kerneld's HTTP API
// (api/openapi.yaml): agents, sessions, runs, approvals, messages,
// memory, and the session's event log as JSON pages or as a live stream.
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithAPIKey(key))
//	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo"})
//	stream, err := c.StreamRun(ctx, s.ID, client.CreateRunRequest{Input: "hello"}, client.FollowOptions{})
//	for text, err := range stream.AssistantText() {
//		if err != nil { ... }
//		fmt.Print(text)
//	}
//
// AssistantText yields the assistant's text alone; All yields every
// event (a text message's events all carry its Role).
//
// Errors kerneld answers are *Problem values (RFC 9457 problem details):
// use errors.As and switch on Problem.Code.
//
// # Streams
//
// Follow reads a session's stream (GET /sessions/{id}/events) and
// StreamRun one run's (POST /sessions/{id}/run with Accept:
// text/event-stream). Both yield typed AG-UI events and resume by
// themselves after a cut: they reconnect with Last-Event-ID set to the
// last seq delivered, so no event is missed or repeated. A run's stream
// resumes on the session's stream, keeping that run's events; the input
// is never posted twice.
//
// # Why not r3labs/sse/v2's client
//
// The streams are read by a small bufio reader (sse.go) rather than by
// github.com/r3labs/sse/v2's client, for reasons measured in
// sse_bench_test.go:
//
//   - A connection cut mid-frame: r3labs' reader returns the partial frame
//     as a whole event, with no error (TestR3labs_DispatchesCutFrame). Its
//     id would be taken as delivered and the real event skipped on resume:
//     a gap, the one thing the reader must not allow. The SSE
//     specification drops an unfinished frame, as this package does.
//   - It only sends GET, so it cannot open a run's stream, which is a POST.
//   - Speed, 1000 kerneld frames over loopback HTTP (go test -bench
//     StreamClient -benchtime 200x, on a 2-vCPU VM): r3labs 15.8 ms and
//     917 KB allocated per 1000 frames, this reader 3.5 ms and 71 KB.
//     Splitting frames alone: 6.0 ms against 1.4 ms (r3labs searches the
//     whole buffer for five newline patterns per frame).
//   - Its default reconnect loop does not watch the context (a cancel that
//     comes while it reconnects is retried, with backoff, for up to 15
//     minutes), and it returns, without resuming, when the server ends a
//     stream cleanly, as kerneld does to a client it drops as too slow.
package client
