// Package httpapitest starts a real kerneld API, over a real kernel with
// the memory store and scripted agents, on a loopback port, for tests of
// the clients of the API (the Go client, the CLI).
package httpapitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/kerneld/kerneld/api"
	"github.com/kerneld/kerneld/internal/feed"
	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// Options configure New.
type Options struct {
	Kernel  kerneltest.Options
	API     httpapi.Options
	Streams httpapi.StreamOptions
	// Wrap, when set, wraps the API's handler: a test's proxy in front of
	// kerneld (see Cutter).
	Wrap func(http.Handler) http.Handler
	// Feed serves the tenants' session feed from the kernel's store, a
	// fresh memory store unless Kernel.Store is one that keeps feeds.
	Feed bool
}

// Server is a running API.
type Server struct {
	*httptest.Server
	Kernel  *kerneltest.Kernel
	Streams *httpapi.Streams
	API     *httpapi.Server
}

// New starts a server closed when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	streams := httpapi.NewStreams(nil, opts.Streams)
	opts.Kernel.Observers = append(opts.Kernel.Observers, streams)
	var sessionFeed *feed.Service
	if opts.Feed {
		if opts.Kernel.Store == nil {
			opts.Kernel.Store = memory.New()
		}
		sessionFeed = feed.New(feed.Options{Log: opts.Kernel.Store.(feed.Log)})
		opts.Kernel.Observers = append(opts.Kernel.Observers, sessionFeed)
		opts.Kernel.Feed, opts.API.Feed = sessionFeed, sessionFeed
	}
	if opts.Kernel.Images == nil {
		opts.Kernel.Images = opts.API.Images // one library, as kerneld has
	}
	k := kerneltest.New(t, opts.Kernel)
	if opts.API.Images == nil {
		opts.API.Images = k.Images
	}
	if sessionFeed != nil {
		sessionFeed.Start(k.FeedSummary)
		t.Cleanup(func() { _ = sessionFeed.Close(context.Background()) }) // before the kernel closes: what it reports then is dropped
	}
	if opts.API.OpenAPI == nil {
		opts.API.OpenAPI = api.OpenAPI
	}
	srv := httpapi.New(k.Kernel, streams, opts.API)
	var h http.Handler = srv
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Config.RegisterOnShutdown(srv.CloseStreams)
	ts.Start()
	t.Cleanup(func() {
		srv.CloseStreams()
		ts.Close()
	})
	return &Server{Server: ts, Kernel: k, Streams: streams, API: srv}
}

// Cutter cuts event streams mid-frame, as a failing network or proxy
// would: the client receives part of a frame, then the connection ends
// without the end of the chunked body.
type Cutter struct {
	// AfterFrames is how many whole frames a stream delivers before the
	// cut, which comes a few bytes into the next frame.
	AfterFrames int
	// Times is how many streams are cut; later ones are left alone.
	Times int

	mu   sync.Mutex
	cuts int
}

// Cuts reports how many streams were cut.
func (c *Cutter) Cuts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts
}

// Wrap cuts the event streams h answers with.
func (c *Cutter) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" || !c.take() {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&cuttingWriter{ResponseWriter: w, frames: c.AfterFrames}, r)
	})
}

// take claims one of the cuts, if any is left.
func (c *Cutter) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cuts >= c.Times {
		return false
	}
	c.cuts++
	return true
}

// cuttingWriter passes frames through until it has passed `frames` of
// them (the retry line counts as one), then `partial` bytes of the next
// one, and then closes the connection under the handler.
type cuttingWriter struct {
	http.ResponseWriter
	frames  int
	partial int
	prev    byte
	cut     bool
}

// partial is how many bytes of the frame after the last whole one get
// through: its id line and the start of the next.
const partial = 12

func (w *cuttingWriter) Write(p []byte) (int, error) {
	if w.cut {
		return 0, http.ErrHijacked
	}
	for i := range p {
		if w.frames == 0 {
			if w.partial == partial {
				n, _ := w.ResponseWriter.Write(p[:i]) // the connection is cut below anyway
				w.cutConnection()
				return n, http.ErrHijacked
			}
			w.partial++
			continue
		}
		if p[i] == '\n' && w.prev == '\n' {
			w.frames--
		}
		w.prev = p[i]
	}
	return w.ResponseWriter.Write(p)
}

// cutConnection flushes what was written and closes the connection.
func (w *cuttingWriter) cutConnection() {
	w.cut = true
	rc := http.NewResponseController(w.ResponseWriter)
	_ = rc.Flush() // best effort: the partial frame is the point
	conn, buf, err := rc.Hijack()
	if err != nil {
		return
	}
	_ = buf.Flush()
	_ = conn.Close()
}

func (w *cuttingWriter) Flush() {
	if !w.cut {
		_ = http.NewResponseController(w.ResponseWriter).Flush() // as the server's own Flush
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *cuttingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
