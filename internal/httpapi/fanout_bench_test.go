package httpapi_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

// BenchmarkFanout measures an event's way from the kernel's observer call
// to every open stream of its session: encoded once into the session's
// feed, then written by each stream to its client in one write per ready
// batch. Clients count frames; each batch waits until all of them have it,
// and no stream may be dropped.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { benchFanout(b, n) })
	}
}

func benchFanout(b *testing.B, n int) {
	streams := httpapi.NewStreams(nil, httpapi.StreamOptions{})
	k := kerneltest.New(b, kerneltest.Options{Observers: []kernel.Observer{streams}})
	srv := httpapi.New(k.Kernel, streams, httpapi.Options{})
	ts := httptest.NewServer(srv)
	b.Cleanup(func() { srv.CloseStreams(); ts.Close() })
	s, err := k.CreateSession(kernel.WithTenant(b.Context(), httpapi.DefaultTenant), kernel.CreateSession{Agent: "echo"})
	if err != nil {
		b.Fatal(err)
	}
	counts := make([]atomic.Int64, n)
	for i := range counts {
		res, err := http.Get(ts.URL + "/sessions/" + s.ID + "/events")
		if err != nil {
			b.Fatal(err)
		}
		go countFrames(res, &counts[i])
	}
	waitUntil(b, func() bool { return streams.Open() == n })

	const batch = 1024 // the size of a large append batch; no stream may be dropped for it
	evs := make([]session.Event, batch)
	ev := session.TextMessageContent("01a1fcb4-9e65-74cb-a8a2-96211192cd2c", " token")
	ev.SessionID, ev.RunID, ev.Time = s.ID, "01a1fcb4-9e65-7072-b822-183a5c12a4ce", time.Now()
	var seq int64
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += batch {
		for i := range evs {
			seq++
			evs[i] = ev
			evs[i].Seq = seq
		}
		streams.ObserveEvents(evs)
		waitUntil(b, func() bool { return allReached(counts, seq) })
	}
	b.StopTimer()
	b.ReportMetric(float64(seq*int64(n))/b.Elapsed().Seconds(), "frames/s")
	if open := streams.Open(); open != n {
		b.Fatalf("%d of %d streams were dropped", n-open, n)
	}
}

// countFrames counts the event frames a stream delivers until it ends.
func countFrames(res *http.Response, n *atomic.Int64) {
	defer res.Body.Close()
	r := bufio.NewReaderSize(res.Body, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("id: ")) {
			n.Add(1)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func allReached(counts []atomic.Int64, seq int64) bool {
	for i := range counts {
		if counts[i].Load() < seq {
			return false
		}
	}
	return true
}

// waitUntil yields until cond holds, or fails after 10 s. It does not
// sleep: a timer's granularity would dominate what is measured.
func waitUntil(tb testing.TB, cond func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("timed out")
		}
		runtime.Gosched()
	}
}
