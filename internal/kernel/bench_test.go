package kernel_test

import (
	"sync/atomic"
	"testing"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

// endSignal is an observer that counts events and reports each run's end
// on a channel, so a benchmark waits without polling.
type endSignal struct {
	events atomic.Int64
	ends   chan struct{}
}

func (o *endSignal) ObserveEvents(evs []session.Event) {
	o.events.Add(int64(len(evs)))
	if evs[len(evs)-1].Type.Ends() {
		o.ends <- struct{}{}
	}
}

func (*endSignal) ObserveSessionEnded(string, int64) {}

// BenchmarkKernel_Run measures a whole conversation turn: create a session,
// run the echo agent on a ten-word input to completion.
func BenchmarkKernel_Run(b *testing.B) {
	obs := &endSignal{ends: make(chan struct{}, 1)}
	k := kerneltest.New(b, kerneltest.Options{Observers: []kernel.Observer{obs}})
	ctx := b.Context()
	const input = "one two three four five six seven eight nine ten"
	b.ReportAllocs()
	for b.Loop() {
		s, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "echo"})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := k.Run(ctx, s.ID, kernel.RunRequest{Input: input}); err != nil {
			b.Fatal(err)
		}
		<-obs.ends
	}
	events := float64(obs.events.Load())
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(events/float64(b.N), "events/op")
}

// BenchmarkKernel_CreateSession measures creating a root session.
func BenchmarkKernel_CreateSession(b *testing.B) {
	k := kerneltest.New(b, kerneltest.Options{})
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "echo"}); err != nil {
			b.Fatal(err)
		}
	}
}
