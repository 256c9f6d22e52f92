package redis

import (
	"context"
	"errors"
	"sync"
)

// loop is the life of a background loop its owner runs with Run and ends
// with Close, as Signals and Tailer are: Run may be called once, Close at
// any time, and Close returns only once Run has.
type loop struct {
	stopped context.Context // ends when Close is called
	stop    context.CancelFunc

	mu      sync.Mutex
	running chan struct{} // closed when Run returns; nil until Run starts
	closed  bool
}

func newLoop() *loop {
	stopped, stop := context.WithCancel(context.Background())
	return &loop{stopped: stopped, stop: stop}
}

// begin starts Run: it returns a context that ends with ctx or at Close,
// and end, which Run must call when it returns. A second Run, or one after
// Close, is an error.
func (l *loop) begin(ctx context.Context) (runCtx context.Context, end func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running != nil || l.closed {
		return nil, nil, errors.New("redis: Run called twice or after Close")
	}
	running := make(chan struct{})
	l.running = running
	runCtx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(l.stopped, cancel)
	return runCtx, func() {
		unhook()
		cancel()
		close(running)
	}, nil
}

// close ends Run, if it started, and waits for it to return.
func (l *loop) close() {
	l.mu.Lock()
	l.closed = true
	running := l.running
	l.mu.Unlock()
	l.stop()
	if running != nil {
		<-running
	}
}
