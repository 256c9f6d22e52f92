// Package webhooktest gives tests webhook receivers: Receiver, in the
// test's process, which verifies every signature with kerneld's own
// verifier and records what it took; and Reference, a Node.js receiver
// that verifies with the Standard Webhooks reference library (npm
// standardwebhooks), as a kerneld user's receiver would.
package webhooktest

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

// Message is one delivery a receiver took.
type Message struct {
	ID   string // webhook-id
	Type string // the payload's type
	Body map[string]any
}

// Receiver takes webhooks on a loopback port, checking each signature
// with its key; it answers 401 to a bad one and Status() (204 by default)
// to the rest.
type Receiver struct {
	URL string
	key webhook.Key

	mu     sync.Mutex
	got    map[string]int // webhook-id → requests taken (2xx)
	msgs   []Message
	bad    int
	status func() int
	seen   chan Message
	srv    *http.Server
	done   chan struct{}
	addr   string
}

// NewReceiver starts a receiver for secret, stopped when tb ends.
func NewReceiver(tb testing.TB, secret string) *Receiver {
	tb.Helper()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		tb.Fatalf("receiver secret: %v", err)
	}
	ln, err := new(net.ListenConfig).Listen(tb.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("receiver: %v", err)
	}
	r := &Receiver{URL: "http://" + ln.Addr().String() + "/hook", addr: ln.Addr().String(), key: key,
		got: make(map[string]int), seen: make(chan Message, 10000)}
	r.serve(ln)
	tb.Cleanup(r.Stop)
	return r
}

func (r *Receiver) serve(ln net.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv, r.done = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}, make(chan struct{})
	srv, done := r.srv, r.done
	go func() { defer close(done); _ = srv.Serve(ln) }() // ends with Stop
}

// Stop closes the receiver: connections to it are refused until Start.
func (r *Receiver) Stop() {
	r.mu.Lock()
	srv, done := r.srv, r.done
	r.mu.Unlock()
	_ = srv.Close()
	<-done
}

// Start serves again on the receiver's address after Stop.
func (r *Receiver) Start(tb testing.TB) {
	tb.Helper()
	ln, err := new(net.ListenConfig).Listen(tb.Context(), "tcp", r.addr)
	if err != nil {
		tb.Fatalf("listen again on %s: %v", r.addr, err)
	}
	r.serve(ln)
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var msg Message
	err := r.key.Verify(req.Header, body, time.Now(), 5*time.Minute)
	if err == nil && req.Header.Get("Content-Type") == "application/json" {
		err = json.Unmarshal(body, &msg.Body)
	}
	r.mu.Lock()
	if err != nil {
		r.bad++
		r.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	status := http.StatusNoContent
	if r.status != nil {
		status = r.status()
	}
	msg.ID, msg.Type = req.Header.Get(webhook.HeaderID), stringOf(msg.Body["type"])
	if status >= 200 && status <= 299 {
		r.got[msg.ID]++
		r.msgs = append(r.msgs, msg)
	}
	r.mu.Unlock()
	if status >= 200 && status <= 299 {
		r.seen <- msg
	}
	w.WriteHeader(status)
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// SetStatus makes the receiver answer f() to well-signed requests; nil
// answers 204.
func (r *Receiver) SetStatus(f func() int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = f
}

// Counts returns how often each webhook-id was taken, and how many
// requests failed the signature check.
func (r *Receiver) Counts() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.got))
	for k, v := range r.got {
		out[k] = v
	}
	return out, r.bad
}

// Messages returns what the receiver took, in order.
func (r *Receiver) Messages() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Message(nil), r.msgs...)
}

// Next waits for the next message taken, failing tb after timeout.
func (r *Receiver) Next(tb testing.TB, timeout time.Duration) Message {
	tb.Helper()
	select {
	case m := <-r.seen:
		return m
	case <-time.After(timeout):
		tb.Fatalf("no webhook arrived within %s", timeout)
		return Message{}
	}
}
