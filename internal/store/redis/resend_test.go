package redis_test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// lossyProxy passes TCP between clients and a Redis server. Once armed, it
// swallows the next reply the server sends and closes that connection: the
// server has run the command, the client never learns it, as after a
// network failure at the wrong moment.
type lossyProxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Bool
	dropped atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startLossyProxy(t *testing.T, target string) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &lossyProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *lossyProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(server, client); server.Close() })
		p.wg.Go(func() { p.replies(client, server) })
	}
}

// replies copies the server's replies to the client until armed, then
// drops the connection instead of passing the next one on.
func (p *lossyProxy) replies(client, server net.Conn) {
	defer client.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && p.armed.CompareAndSwap(true, false) {
			p.dropped.Add(1)
			server.Close()
			return
		}
		if n > 0 {
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *lossyProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestAppendEvents_ReplyLost loses the reply to an append that Redis ran.
// The store must send the batch again and the script recognise it: the
// append succeeds with the seqs it was given, and the log holds the batch
// once.
func TestAppendEvents_ReplyLost(t *testing.T) {
	srv := redistest.Use(t)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	proxy := startLossyProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := redis.Open(t.Context(), redis.Options{URL: u.String(), Prefix: srv.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })

	s := mustCreateSession(t, st)
	token, err := st.AcquireLease(t.Context(), s.ID, "a", time.Minute)
	require.NoError(t, err)
	batch := func(texts ...string) []session.Event {
		evs := make([]session.Event, len(texts))
		for i, text := range texts {
			evs[i] = session.TextMessageContent("m1", text)
			evs[i].SessionID, evs[i].RunID, evs[i].Time = s.ID, "r1", time.Now()
		}
		return evs
	}
	require.NoError(t, st.AppendEvents(t.Context(), token, batch("a", "b", "c")))

	proxy.armed.Store(true)
	lost := batch("d", "e")
	require.NoError(t, st.AppendEvents(t.Context(), token, lost))
	require.EqualValues(t, 1, proxy.dropped.Load(), "no reply was lost")
	assert.Equal(t, []int64{4, 5}, []int64{lost[0].Seq, lost[1].Seq})

	next := batch("f")
	require.NoError(t, st.AppendEvents(t.Context(), token, next))
	assert.EqualValues(t, 6, next[0].Seq)
	logged, err := st.ReadEvents(t.Context(), s.ID, 0, 100)
	require.NoError(t, err)
	var texts []string
	for i, ev := range logged {
		assert.EqualValues(t, i+1, ev.Seq)
		texts = append(texts, ev.Member("delta"))
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, texts, "the log")
}

// TestAppendEvents_ReplyLostAfterTakeOver: a batch resent after another
// replica took the lease is refused as fenced, not recognised as applied.
func TestAppendEvents_ReplyLostAfterTakeOver(t *testing.T) {
	st := openStore(t)
	s := mustCreateSession(t, st)
	token, err := st.AcquireLease(t.Context(), s.ID, "a", 50*time.Millisecond)
	require.NoError(t, err)
	ev := session.TextMessageContent("m1", "x")
	ev.SessionID, ev.RunID, ev.Time = s.ID, "r1", time.Now()
	require.NoError(t, st.AppendEvents(t.Context(), token, []session.Event{ev}))
	require.Eventually(t, func() bool {
		_, err := st.AcquireLease(t.Context(), s.ID, "b", time.Minute)
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	err = st.AppendEvents(t.Context(), token, []session.Event{ev})
	assert.True(t, errors.Is(err, session.ErrFenced), "append under a lost lease: %v", err)
}
