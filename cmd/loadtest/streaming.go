package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// W2 streams runs at three concurrencies, each on sessions of its own
// created first and not timed: the time to the first token at c = 1 and
// 10 shows what one user feels on a quiet and on a busy server, and c =
// inFlight is also the phase whose rates, CPU and bytes W2 reports.
func ttftLevels(z sizes) []struct{ conc, runs int } {
	return []struct{ conc, runs int }{{1, max(z.runs/10, 1)}, {10, max(z.runs/2, 10)}, {z.inFlight, z.runs}}
}

// streamRuns is W2: many sessions each streaming one run at once.
func streamRuns(ctx context.Context, e *env) error {
	levels := ttftLevels(e.sz)
	for i, l := range levels {
		if err := streamRunsAt(ctx, e, l.conc, l.runs, i == len(levels)-1); err != nil {
			return fmt.Errorf("c=%d: %w", l.conc, err)
		}
	}
	return nil
}

// streamRunsAt streams runs runs, conc at a time, and records the time to
// their first tokens as measured at c=conc; with all, also the rates, the
// CPU and the bytes they cost, and how their streams fared.
func streamRunsAt(ctx context.Context, e *env, conc, runs int, all bool) error {
	ids := make([]string, runs)
	err := inFlight(ctx, runs, e.sz.inFlight, func(i int) (err error) {
		ids[i], err = e.cl.createSession(ctx, e.srv.url(i))
		return err
	})
	if err != nil {
		return err
	}
	inputs := make([]string, runs)
	for i := range inputs {
		inputs[i] = words(e.sz.runTokens, uint64(i))
	}
	var (
		mu      sync.Mutex
		streams []*runStream
		ttft    latencies
	)
	cpu, received := e.meterCPU(), e.cl.received.Load()
	start := time.Now()
	err = inFlight(ctx, runs, conc, func(i int) error {
		rs, err := e.cl.streamRun(ctx, e.srv.url(i+1), ids[i], inputs[i]) // another replica than the create's
		if err != nil {
			return err
		}
		if rs.tokens != e.sz.runTokens {
			return fmt.Errorf("session %s: %d tokens, want %d", ids[i], rs.tokens, e.sz.runTokens)
		}
		ttft.add(rs.firstToken)
		mu.Lock()
		streams = append(streams, rs)
		mu.Unlock()
		return nil
	})
	wall := time.Since(start)
	if err != nil {
		return err
	}
	d := ttft.sorted()
	at := fmt.Sprintf(" at c=%d", conc)
	e.rec("W2 time to first token p50"+at, kindDuration, float64(percentile(d, 50)))
	e.rec("W2 time to first token p99"+at, kindDuration, float64(percentile(d, 99)))
	if !all {
		return nil
	}
	recordStreams(e, streams, wall, cpu, e.cl.received.Load()-received)
	return resumeCheck("W2", streams, e)
}

// recordStreams records W2's rates, CPU and bytes: streams took wall, the
// CPU since cpu and received bytes.
func recordStreams(e *env, streams []*runStream, wall time.Duration, cpu *cpuMeter, received int64) {
	var sum runStream
	for _, rs := range streams {
		sum.tokens += rs.tokens
		sum.frames += rs.frames
		sum.dropped += rs.dropped
		sum.reconnects += rs.reconnects
	}
	e.rec("W2 runs/s", kindRate, float64(len(streams))/wall.Seconds())
	e.rec("W2 tokens delivered/s", kindRate, float64(sum.tokens)/wall.Seconds())
	e.rec("W2 frames per token", kindRatio, float64(sum.frames)/float64(sum.tokens))
	cpu.per(e, "W2", "token", sum.tokens)
	e.rec("W2 bytes on the wire per token", kindBytes, float64(received)/float64(sum.tokens))
	e.rec("W2 dropped streams", kindCount, float64(sum.dropped))
	e.rec("W2 reconnects", kindCount, float64(sum.reconnects))
}

// bigRun is W3: one long run as fast as the model streams, and what it
// costs the server in memory.
func bigRun(ctx context.Context, e *env) error {
	id, err := e.cl.createSession(ctx, e.srv.url(0))
	if err != nil {
		return err
	}
	input := words(e.sz.bigTokens, 1)
	srv := e.srv.procs[1%len(e.srv.procs)] // the replica that runs it: where the run is posted
	rssBefore, hwmBefore, err := srv.memory()
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	peak := make(chan int64, 1)
	go func() { peak <- samplePeakRSS(srv, rssBefore, stop) }()
	cpu, received := e.meterCPU(), e.cl.received.Load()
	rs, err := e.cl.streamRun(ctx, e.srv.url(1), id, input)
	close(stop)
	peakRSS := <-peak
	if err != nil {
		return err
	}
	if _, hwm, err := srv.memory(); err == nil && hwm > hwmBefore {
		peakRSS = max(peakRSS, hwm) // the peak was during the run, and VmHWM caught it exactly
	}
	if rs.tokens != e.sz.bigTokens {
		return fmt.Errorf("%d tokens, want %d", rs.tokens, e.sz.bigTokens)
	}
	e.rec("W3 tokens delivered/s", kindRate, float64(rs.tokens)/rs.elapsed.Seconds())
	e.rec("W3 frames per token", kindRatio, float64(rs.frames)/float64(rs.tokens))
	e.rec("W3 time to first token", kindDuration, float64(rs.firstToken))
	cpu.per(e, "W3", "token", rs.tokens)
	e.rec("W3 bytes on the wire per token", kindBytes, float64(e.cl.received.Load()-received)/float64(rs.tokens))
	e.rec("W3 server RSS growth", kindBytes, float64(peakRSS-rssBefore))
	e.rec("W3 tokens on the inline stream", kindCount, float64(rs.inline))
	e.rec("W3 dropped streams", kindCount, float64(rs.dropped))
	e.rec("W3 reconnects", kindCount, float64(rs.reconnects))
	return resumeCheck("W3", []*runStream{rs}, e)
}

// samplePeakRSS reads the server's VmRSS every few milliseconds until stop
// is closed and returns the highest value seen.
func samplePeakRSS(srv *server, peak int64, stop <-chan struct{}) int64 {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if rss, _, err := srv.memory(); err == nil {
			peak = max(peak, rss)
		}
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}
