package main

import (
	"context"
	"errors"
	"fmt"
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
	// remark records something the table's reader must know, once per text.
	remark func(format string, args ...any)
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
		l := ttftLevels(z)
		return fmt.Sprintf("sessions streaming one run of %d tokens each: %s runs one at a time, %s runs %d at a time, "+
			"then %s runs %d at a time, which its rates, CPU and bytes are of", z.runTokens, thousands(int64(l[0].runs)),
			thousands(int64(l[1].runs)), l[1].conc, thousands(int64(l[2].runs)), l[2].conc)
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

// cpuMeter measures the CPU time a workload's timed part cost kerneld,
// and the store's server besides (see storeServer).
type cpuMeter struct {
	srv           *cluster
	server, store time.Duration
	err, storeErr error
}

func (e *env) meterCPU() *cpuMeter {
	m := &cpuMeter{srv: e.srv}
	m.server, m.err = e.srv.cpuTime()
	m.store, m.storeErr = e.srv.storeCPU()
	return m
}

// per records the CPU time used since meterCPU divided by n, as
// "<what> server CPU per <unit>" (kerneld's) and "<what> server + store
// CPU per <unit>" (kerneld's and the store server's).
func (m *cpuMeter) per(e *env, what, unit string, n int) {
	server, err := m.srv.cpuTime()
	store, storeErr := m.srv.storeCPU()
	if m.err != nil || err != nil || n == 0 {
		return
	}
	e.rec(what+" server CPU per "+unit, kindDuration, float64(server-m.server)/float64(n))
	if err := errors.Join(m.storeErr, storeErr); err != nil {
		e.remark("%s server + store CPU not measured on %s: the store server at %s: %v",
			what, m.srv.spec.store, m.srv.spec.storeAddr(), err)
		return
	}
	e.rec(what+" server + store CPU per "+unit, kindDuration, float64(server-m.server+store-m.store)/float64(n))
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
	cpu.per(e, "W1", "create", len(d))
	return nil
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
