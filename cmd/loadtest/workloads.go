package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// sizes are the workloads' parameters; -quick shrinks them.
type sizes struct {
	inFlight  int // concurrent requests in W1, W2 and W4
	creates   int // W1
	runs      int // W2: sessions, one run each
	runTokens int // W2: tokens per run
	bigTokens int // W3: tokens of the one run
	idle      int // W4: idle sessions
	lagRuns   int // W5: sessions, one paced run each, all at once
	lagTokens int // W5: tokens per run
}

var (
	fullSizes  = sizes{inFlight: 50, creates: 2000, runs: 200, runTokens: 200, bigTokens: 20000, idle: 10000, lagRuns: 20, lagTokens: 300}
	quickSizes = sizes{inFlight: 50, creates: 500, runs: 50, runTokens: 200, bigTokens: 5000, idle: 2000, lagRuns: 10, lagTokens: 200}
)

// env is what a workload runs against: one fresh cluster, and where its
// measurements go.
type env struct {
	cl  *client
	srv *cluster
	sz  sizes
	rec func(metric string, k kind, v float64) // for this store and build
}

// workload is one fixed load, bounded by its timeout.
type workload struct {
	name    string
	timeout time.Duration
	about   func(sizes) string
	run     func(ctx context.Context, e *env) error
}

var workloads = []workload{
	{"W1", time.Minute, func(z sizes) string {
		return fmt.Sprintf("%s session creates, %d in flight", thousands(int64(z.creates)), z.inFlight)
	}, createSessions},
	{"W2", 2 * time.Minute, func(z sizes) string {
		return fmt.Sprintf("%s sessions, one streamed run of %d tokens each, %d in flight",
			thousands(int64(z.runs)), z.runTokens, z.inFlight)
	}, streamRuns},
	{"W3", 2 * time.Minute, func(z sizes) string {
		return fmt.Sprintf("one streamed run of %s tokens", thousands(int64(z.bigTokens)))
	}, bigRun},
	{"W4", 2 * time.Minute, func(z sizes) string {
		return fmt.Sprintf("%s idle sessions, %d created at a time", thousands(int64(z.idle)), z.inFlight)
	}, idleSessions},
	{"W5", 2 * time.Minute, func(z sizes) string {
		return fmt.Sprintf("%d sessions at once, one run of %d tokens each at 500 tokens/s, streamed inline from the replica that runs it "+
			"and followed on the next replica", z.lagRuns, z.lagTokens)
	}, subscriberLag},
}

// cpuMeter measures the server CPU time a workload's timed part used.
type cpuMeter struct {
	srv   *cluster
	start time.Duration
	err   error
}

func (e *env) meterCPU() *cpuMeter {
	m := &cpuMeter{srv: e.srv}
	m.start, m.err = e.srv.cpuTime()
	return m
}

// per records the CPU time used since meterCPU, divided by n.
func (m *cpuMeter) per(e *env, metric string, n int) {
	end, err := m.srv.cpuTime()
	if m.err != nil || err != nil || n == 0 {
		return
	}
	e.rec(metric, kindDuration, float64(end-m.start)/float64(n))
}

// createSessions is W1: creates per second and their latency.
func createSessions(ctx context.Context, e *env) error {
	var lat latencies
	cpu := e.meterCPU()
	start := time.Now()
	err := inFlight(ctx, e.sz.creates, e.sz.inFlight, func(i int) error {
		t := time.Now()
		if _, err := e.cl.createSession(ctx, e.srv.url(i)); err != nil {
			return err
		}
		lat.add(time.Since(t))
		return nil
	})
	wall := time.Since(start)
	if err != nil {
		return err
	}
	d := lat.sorted()
	e.rec("W1 creates/s", kindRate, float64(len(d))/wall.Seconds())
	e.rec("W1 create latency p50", kindDuration, float64(percentile(d, 50)))
	e.rec("W1 create latency p99", kindDuration, float64(percentile(d, 99)))
	cpu.per(e, "W1 server CPU per create", len(d))
	return nil
}

// streamRuns is W2: many sessions each streaming one run at once. The
// sessions are created first and not timed.
func streamRuns(ctx context.Context, e *env) error {
	n := e.sz.runs
	ids := make([]string, n)
	err := inFlight(ctx, n, e.sz.inFlight, func(i int) (err error) {
		ids[i], err = e.cl.createSession(ctx, e.srv.url(i))
		return err
	})
	if err != nil {
		return err
	}
	inputs := make([]string, n)
	for i := range inputs {
		inputs[i] = words(e.sz.runTokens, uint64(i))
	}
	var (
		mu      sync.Mutex
		streams []*runStream
		ttft    latencies
	)
	cpu := e.meterCPU()
	start := time.Now()
	err = inFlight(ctx, n, e.sz.inFlight, func(i int) error {
		rs, err := e.cl.streamRun(ctx, e.srv.url(i+1), ids[i], inputs[i]) // another replica than the create's
		if err != nil {
			return err
		}
		if rs.tokens != e.sz.runTokens {
			return fmt.Errorf("session %s: %d token events, want %d", ids[i], rs.tokens, e.sz.runTokens)
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
	var tokens, dropped, reconnects int
	var bytes int64
	for _, rs := range streams {
		tokens += rs.tokens
		bytes += rs.tokenBytes
		dropped += rs.dropped
		reconnects += rs.reconnects
	}
	d := ttft.sorted()
	e.rec("W2 runs/s", kindRate, float64(len(streams))/wall.Seconds())
	e.rec("W2 token events/s", kindRate, float64(tokens)/wall.Seconds())
	e.rec("W2 time to first token p50", kindDuration, float64(percentile(d, 50)))
	e.rec("W2 time to first token p99", kindDuration, float64(percentile(d, 99)))
	cpu.per(e, "W2 server CPU per token event", tokens)
	e.rec("bytes on the wire per token event", kindBytes, float64(bytes)/float64(tokens))
	e.rec("W2 dropped streams", kindCount, float64(dropped))
	e.rec("W2 reconnects", kindCount, float64(reconnects))
	return resumeCheck("W2", streams, e)
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
	cpu := e.meterCPU()
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
		return fmt.Errorf("%d token events, want %d", rs.tokens, e.sz.bigTokens)
	}
	e.rec("W3 token events/s", kindRate, float64(rs.tokens)/rs.elapsed.Seconds())
	e.rec("W3 time to first token", kindDuration, float64(rs.firstToken))
	cpu.per(e, "W3 server CPU per token event", rs.tokens)
	e.rec("W3 server RSS growth", kindBytes, float64(peakRSS-rssBefore))
	e.rec("W3 token events on the inline stream", kindCount, float64(rs.inline))
	e.rec("W3 dropped streams", kindCount, float64(rs.dropped))
	e.rec("W3 reconnects", kindCount, float64(rs.reconnects))
	e.rec("bytes on the wire per token event", kindBytes, float64(rs.tokenBytes)/float64(rs.tokens))
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

// idleSessions is W4: the server memory each idle session holds.
func idleSessions(ctx context.Context, e *env) error {
	srv := e.srv.procs[0]
	before, _, err := srv.memory()
	if err != nil {
		return err
	}
	n := e.sz.idle
	err = inFlight(ctx, n, e.sz.inFlight, func(i int) error {
		_, err := e.cl.createSession(ctx, srv.url)
		return err
	})
	if err != nil {
		return err
	}
	after, _, err := srv.memory()
	if err != nil {
		return err
	}
	e.rec("W4 server RSS per idle session", kindBytes, float64(after-before)/float64(n))
	return nil
}

// resumeCheck records the seqs the streams skipped or repeated, and
// fails the workload if there were any: kerneld promises neither happens,
// across a resume too.
func resumeCheck(name string, streams []*runStream, e *env) error {
	var gaps, dups int
	for _, rs := range streams {
		gaps += rs.gaps
		dups += rs.dups
	}
	e.rec(name+" seq gaps + duplicates", kindCount, float64(gaps+dups))
	if gaps+dups > 0 {
		return fmt.Errorf("%s: %d seq gaps and %d duplicate seqs across %d runs", name, gaps, dups, len(streams))
	}
	return nil
}
